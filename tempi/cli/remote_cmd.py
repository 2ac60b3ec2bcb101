"""`tempi attach|steer|follow-up|abort|stop ID`: act on a running session from anywhere that
reaches its Temporal server."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from tempi.cli.errors import UserError
from tempi.cli.open_clients import marked_open
from tempi.cli.runtime import open_runtime
from tempi.cli.server_link import events_across_outages, link_for
from tempi.client import SessionNotFound, SessionService
from tempi.config.paths import default_sessions_root, tempi_home
from tempi.store.session_store import SessionStore

REMOTE_COMMANDS = ("attach", "steer", "follow-up", "abort", "stop")
# How long `tempi stop` waits for the workflow to end (it aborts a run first).
STOP_WAIT_S = 60.0

_HELP = {
    "attach": (
        "Show the live events of a running session, from its start or from now. Ctrl-C detaches; "
        "the session keeps running.",
        "examples:\n  tempi attach 3f2a\n  tempi attach 3f2a --from-now --mode json",
    ),
    "steer": (
        "Send a steering message to a running session: it reaches the model after the current tool calls.",
        'examples:\n  tempi steer 3f2a "stop refactoring, just fix the bug"',
    ),
    "follow-up": (
        "Queue a message for when the running session would otherwise stop (starts a run if it is idle).",
        'examples:\n  tempi follow-up 3f2a "then update the changelog"',
    ),
    "abort": (
        "Abort the current run of a session; the session stays usable.",
        "examples:\n  tempi abort 3f2a",
    ),
    "stop": (
        "End a running session's workflow (aborting its current run) and its sandbox. The session "
        "file stays: `tempi --session ID` continues it, with new flags such as --sandbox.",
        "examples:\n  tempi stop 3f2a\n  tempi --session 3f2a --sandbox bwrap",
    ),
}


def _parser(name: str) -> argparse.ArgumentParser:
    description, examples = _HELP[name]
    p = argparse.ArgumentParser(
        prog=f"tempi {name}",
        description=description,
        epilog=examples
        + "\n\nSESSION is an id, a unique id prefix or a session file (see `tempi sessions list`).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("session", help="session id, id prefix or file path")
    if name in ("steer", "follow-up"):
        p.add_argument("message", help="the message to deliver")
    if name == "attach":
        p.add_argument("--from-now", action="store_true", help="skip what already happened")
        p.add_argument(
            "--mode", choices=["text", "json"], default="text", help="readable text or pi's JSON events"
        )
    p.add_argument("--no-worker", action="store_true", help="use workers elsewhere (with TEMPORAL_ADDRESS)")
    return p


async def cmd_remote(argv: list[str], name: str) -> int:
    args = _parser(name).parse_args(argv)
    store = SessionStore(default_sessions_root())
    async with open_runtime(no_worker=args.no_worker, quiet=True) as rt:
        try:
            session = await SessionService(rt.client, store).find(args.session)
        except SessionNotFound as err:
            raise UserError(str(err)) from err
        if name == "steer":
            await session.steer(args.message)
        elif name == "follow-up":
            await session.follow_up(args.message)
        elif name == "abort":
            await session.abort()
        elif name == "stop":
            await session.shutdown()
            try:
                await asyncio.wait_for(session.handle.result(), STOP_WAIT_S)
            except TimeoutError:
                raise UserError(
                    f"Session {session.session_id[:8]} was asked to stop but is still running after "
                    f"{STOP_WAIT_S:.0f} s: is a worker running? Check with `tempi sessions list`."
                ) from None
            print(
                f"tempi: session {session.session_id[:8]} stopped; `tempi --session {session.session_id[:8]}` "
                "continues it",
                file=sys.stderr,
            )
        else:
            follower = session.follow()
            if args.from_now:
                await follower.poll()
            link, say = (
                link_for(rt.embedded),
                lambda text: print(f"tempi: {text}", file=sys.stderr, flush=True),
            )
            with marked_open(tempi_home(), "attach", session.session_id, os.getcwd(), session.session_path):
                async for event in events_across_outages(follower, link, say):
                    if args.mode == "json":
                        print(json.dumps(event, ensure_ascii=False), flush=True)
                    else:
                        print_readable(event)
    return 0


def print_readable(event: dict[str, Any]) -> None:
    kind = event["type"]
    if kind == "message_end":
        msg = event["message"]
        role = msg.get("role")
        if role == "user":
            print(f"\n> {''.join(b.get('text', '') for b in msg.get('content', []) if isinstance(b, dict))}")
        elif role == "assistant":
            for block in msg.get("content", []):
                if block.get("type") == "text":
                    print(block["text"])
            if msg.get("stopReason") in ("error", "aborted"):
                print(f"[{msg.get('stopReason')}] {msg.get('errorMessage', '')}")
    elif kind == "tool_execution_start":
        print(f"  $ {event['toolName']} {json.dumps(event['args'])[:200]}")
    elif kind == "tool_execution_end" and event.get("isError"):
        text = "".join(b.get("text", "") for b in event["result"].get("content", []))
        print(f"  ! {text[:300]}")
    sys.stdout.flush()
