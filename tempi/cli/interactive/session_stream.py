"""The session on screen: what it did before it was opened, then its events as they come
(and what the footer and the status line learn from them)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from temporalio.service import RPCError

from tempi.cli.interactive.footer import usage_tokens
from tempi.cli.interactive.render import history_blocks, notice
from tempi.cli.interactive.status_line import ABORTING_TEXT
from tempi.client.session_join import join_session

if TYPE_CHECKING:
    from tempi.cli.interactive.app import InteractiveApp


async def show_history(app: InteractiveApp) -> int:
    """Print the session so far; return where the events that go on from it start (a run
    under way is shown from its beginning, including what it did while no one watched)."""
    join = await join_session(app.session, app.service.store)
    state = join.state
    blocks = history_blocks(join.messages, app.display)
    if blocks:
        title = state.session_name or state.session_id[:8]
        await app.show(notice(f"── session {title}: earlier messages ──"), *blocks)
    if join.run_going:
        await app.show(notice("── the agent is still working; following it live ──"))
    return join.from_offset


async def pump(app: InteractiveApp) -> None:
    assert app.follower is not None
    while True:
        try:
            batch = await app.follower.poll()
        except RPCError as err:
            await _server_trouble(app, err)
            continue
        await _server_answered(app)
        now = time.monotonic()
        blocks: list[RenderableType] = []
        for event in batch:
            blocks.extend(app.view.apply(event, now))
            _note(app, event)
        await app.show(*blocks)
        app.application.invalidate()
        if not batch:
            await app.follower.wait_for_news()


async def _server_trouble(app: InteractiveApp, err: RPCError) -> None:
    news = app.link.failed(err)
    if news is not None:
        await app.show(notice(news, "yellow"))
        app.application.invalidate()
    if app.link.lost:
        await app.link.wait_until_up()
    await asyncio.sleep(0.5)  # the server may be up before its worker answers queries


async def _server_answered(app: InteractiveApp) -> None:
    news = app.link.answered()
    if news is not None:
        await app.show(notice(news, "green"))
        app.spawn(app.refresh_footer())


def _note(app: InteractiveApp, event: dict[str, Any]) -> None:
    kind = event.get("type")
    message = event.get("message") or {}
    if kind == "message_end" and message.get("stopReason") == "aborted":
        app.clear_status(ABORTING_TEXT)  # "Aborted." is printed now
    if kind == "message_end" and message.get("role") == "assistant":
        app.footer.saw_answer(message)
        if message.get("usage") and message.get("stopReason") not in ("error", "aborted"):
            app.footer.context_tokens = usage_tokens(message["usage"])
    elif kind == "agent_end":
        app.clear_status(ABORTING_TEXT)
        app.spawn(app.refresh_footer())
    elif kind == "compaction_end":
        app.spawn(app.refresh_footer(estimate_context=True))
    elif kind == "session_info_changed":
        app.footer.session_name = event.get("name") or None
