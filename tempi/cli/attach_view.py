"""`tempi attach ID` in text mode: the session as the interactive view shows it (the
conversation so far, then the live run with tool calls and their results), a line when it
goes idle, and a quiet detach on Ctrl+C."""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import signal
import sys
import time
from collections.abc import Callable

from rich.console import Console, RenderableType

from tempi.cli.interactive.render import LiveView, history_blocks, notice, to_ansi
from tempi.cli.server_link import ServerLink, batches_across_outages
from tempi.client import SessionClient, SessionService
from tempi.client.session_join import join_session


def _plain(renderable: RenderableType, width: int) -> str:
    buffer = io.StringIO()
    Console(
        file=buffer, force_terminal=False, no_color=True, width=width, emoji=False, highlight=False
    ).print(renderable)
    return buffer.getvalue()


def _write(*blocks: RenderableType) -> None:
    # Colours for a terminal; plain text for a file or a pipe (a log, grep).
    render = to_ansi if sys.stdout.isatty() else _plain
    width = shutil.get_terminal_size((100, 40)).columns
    sys.stdout.write("".join(render(b, width) for b in blocks))
    sys.stdout.flush()


async def _show_history(service: SessionService, session: SessionClient) -> int:
    """Print the conversation so far; return where the events that go on from it start."""
    join = await join_session(session, service.store)
    state = join.state
    blocks = history_blocks(join.messages)
    if blocks:
        _write(
            notice(f"── session {state.session_name or state.session_id[:8]}: earlier messages ──"), *blocks
        )
    return join.from_offset


def _idle_note(session_id: str) -> RenderableType:
    short = session_id[:8]
    return notice(
        f'── session {short} is idle: waiting for a message (tempi follow-up {short} "…", or '
        f"tempi --session {short}); Ctrl+C detaches ──"
    )


async def _follow(
    service: SessionService,
    session: SessionClient,
    *,
    from_now: bool,
    link: ServerLink,
    say: Callable[[str], None],
) -> None:
    start = None if from_now else await _show_history(service, session)
    follower = session.follow(from_offset=start or 0, subagents=False, shared=True)
    if start is None:
        await follower.skip_to_end()
    view = LiveView()
    said_idle = False
    async for batch in batches_across_outages(follower, link, say):
        now = time.monotonic()
        blocks: list[RenderableType] = []
        for event in batch:
            blocks.extend(view.apply(event, now))
            if event.get("type") == "agent_start":
                said_idle = False
        if blocks:
            _write(*blocks)
        page = follower.last_page
        if not batch and page is not None and not page.is_streaming and not view.streaming and not said_idle:
            _write(_idle_note(session.session_id))
            said_idle = True
        if not batch:
            await follower.wait_for_news()


async def attach_text(
    service: SessionService,
    session: SessionClient,
    *,
    from_now: bool,
    link: ServerLink,
    say: Callable[[str], None],
) -> int:
    """Follow until Ctrl+C (or SIGTERM); return the exit code a detach gives (0)."""
    _write(
        notice(f"Attached to session {session.session_id[:8]}. Ctrl+C detaches; the session keeps running.")
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    following = asyncio.ensure_future(_follow(service, session, from_now=from_now, link=link, say=say))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({following, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (following, stopping):
            task.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    if following in done:
        following.result()  # an error while following is the caller's to report
    with contextlib.suppress(asyncio.CancelledError):
        await following
    _write(notice(f"Detached; session {session.session_id[:8]} goes on without you."))
    return 0
