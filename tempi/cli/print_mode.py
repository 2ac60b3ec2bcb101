"""`tempi -p` (text: the final answer) and `--mode json` (pi's event stream)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.service import RPCError

from tempi.agent.messages import ImageContent
from tempi.cli import pi_json
from tempi.cli.errors import UserError
from tempi.cli.session_choice import OpenSession
from tempi.client import SessionRefused


def _header(opened: OpenSession) -> dict[str, Any]:
    config = opened.config
    header: dict[str, Any] = {
        "type": "session",
        "version": 3,
        "id": config.session_id,
        "timestamp": config.created_at or "",
        "cwd": config.cwd,
    }
    if config.parent_session:
        header["parentSession"] = config.parent_session
    return header


Reopen = Callable[[], Awaitable[OpenSession | None]]


async def run_print(
    opened: OpenSession,
    prompts: list[str],
    images: list[ImageContent],
    mode: str,
    reopen: Reopen | None = None,
) -> int:
    """`reopen`: the session continued from its file if its workflow has closed (None while
    it runs), for a session that waited past its idle time just as this run opened it."""
    session = opened.session
    if mode == "json":
        print(pi_json.dumps(_header(opened)), flush=True)
    follower = session.follow()
    if not opened.started_here:
        # Skip what happened before this prompt. A session started here has no past, and
        # its first workflow task then carries the prompt alone: one round trip fewer.
        await follower.poll()
    final: dict[str, Any] | None = None
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, lambda: asyncio.ensure_future(session.abort()))
    for index, text in enumerate(prompts):
        try:
            try:
                await session.prompt(text, images=images if index == 0 else [])
            except RPCError:
                reopened = await reopen() if reopen is not None and index == 0 else None
                if reopened is None:
                    raise
                session, follower = reopened.session, reopened.session.follow()
                await session.prompt(text, images=images)
        except SessionRefused as err:
            raise UserError(f"The session refused the prompt: {err}") from err
        async for event in follower.events(until_idle=True):
            if mode == "json":
                print(pi_json.dumps(event), flush=True)
            if event["type"] == "message_end" and event["message"].get("role") == "assistant":
                final = event["message"]
        if final and final.get("stopReason") in ("error", "aborted"):
            break
    return _finish(final, mode)


def _finish(final: dict[str, Any] | None, mode: str) -> int:
    if final is None:
        print("tempi: the run ended without an answer", file=sys.stderr)
        return 1
    if final.get("stopReason") in ("error", "aborted"):
        print(final.get("errorMessage") or f"Request {final.get('stopReason')}", file=sys.stderr)
        return 1
    if mode == "text":
        text = "".join(b.get("text", "") for b in final.get("content", []) if b.get("type") == "text")
        print(text)
    return 0
