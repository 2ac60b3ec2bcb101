"""Where a watcher joins a session: the conversation so far, read from the file, and the
event offset that goes on from exactly there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tempi.client.session import SessionClient
from tempi.client.transcript import context_messages, load_at_leaf
from tempi.store.session_store import SessionStore
from tempi.workflows.session_types import SessionStateView


@dataclass(frozen=True)
class SessionJoin:
    state: SessionStateView
    messages: list[dict[str, Any]]  # the conversation before `from_offset`'s events
    from_offset: int
    run_going: bool  # the events start at the beginning of a run under way


async def join_session(session: SessionClient, store: SessionStore) -> SessionJoin:
    # The log's end is read before the state: a prompt that lands while the state and the
    # file are read is then in the events that follow (a run under way replays from its
    # start), where reading the end afterwards skipped its first events, the prompt's own.
    end = await session.log_end()
    state = await session.state()
    loaded, leaf = await load_at_leaf(store, state.session_file, state.leaf_id)
    messages = context_messages(loaded, leaf)
    run = await session.current_run_start() if state.is_streaming else None
    if run is None:
        return SessionJoin(state, messages, end, run_going=False)
    offset, first_ms = run
    earlier = [m for m in messages if int(m.get("timestamp") or 0) < first_ms]
    return SessionJoin(state, earlier, offset, run_going=True)
