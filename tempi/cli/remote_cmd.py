"""`tempi attach|steer|follow-up|abort|stop ID`: act on a running session from anywhere that
reaches its Temporal server."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from tempi.cli.errors import UserError
from tempi.cli.open_clients import marked_open
from tempi.cli.queued_messages import print_taken_back
from tempi.cli.runtime import open_runtime
from tempi.cli.server_link import events_across_outages, link_for
from tempi.cli.sessions_command import configured_session_dir
from tempi.client import SessionNotFound, SessionService
from tempi.config.paths import session_roots, tempi_home
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
        "Abort the current run of a session; the session stays usable. Messages queued for the "
        "run are not sent: they are printed instead.",
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
    store = SessionStore(*session_roots())
    async with open_runtime(no_worker=args.no_worker, quiet=True) as rt:
        service = SessionService(rt.client, store)
        try:
            # As `tempi sessions` does: a settings.json sessionDir holds sessions too.
            session = await service.find(args.session, configured_session_dir(Path.cwd().resolve()))
        except SessionNotFound as err:
            raise UserError(str(err)) from err
        if name in ("steer", "follow-up"):
            was_idle = not (await session.state()).is_streaming
            if name == "steer":
                await session.steer(args.message)
            else:
                await session.follow_up(args.message)
            short = session.session_id[:8]
            if was_idle:
                print(
                    f"tempi: session {short} was idle, so the message started a run "
                    f"(watch it with `tempi attach {short}`)",
                    file=sys.stderr,
                )
            else:
                when = "after its current tool calls" if name == "steer" else "when it would otherwise stop"
                what = "steering message" if name == "steer" else "follow-up"
                print(
                    f"tempi: {what} queued for session {short}; the model reads it {when} "
                    f"(watch with `tempi attach {short}`)",
                    file=sys.stderr,
                )
        elif name == "abort":
            print_taken_back(await session.dequeue(abort=True))
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
        elif args.mode == "text":
            from tempi.cli.attach_view import attach_text

            with marked_open(tempi_home(), "attach", session.session_id, os.getcwd(), session.session_path):
                return await attach_text(
                    service, session, from_now=args.from_now, link=link_for(rt.embedded), say=say_on_stderr
                )
        else:
            follower = session.follow(shared=True)
            if args.from_now:
                await follower.skip_to_end()
            with marked_open(tempi_home(), "attach", session.session_id, os.getcwd(), session.session_path):
                async for event in events_across_outages(follower, link_for(rt.embedded), say_on_stderr):
                    print(json.dumps(event, ensure_ascii=False), flush=True)
    return 0


def say_on_stderr(text: str) -> None:
    print(f"tempi: {text}", file=sys.stderr, flush=True)
