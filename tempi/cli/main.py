"""The `tempi` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowUpdateFailedError

from tempi.activities.session_store import SessionStore
from tempi.agent.model_registry import ModelSelectionError, select_model
from tempi.agent.system_prompt import build_system_prompt
from tempi.agent.tool_specs import ALL_TOOLS, DEFAULT_TOOLS
from tempi.cli.event_follower import EventFollower
from tempi.cli.runtime import open_runtime
from tempi.cli.sessions import (
    SessionNotFound,
    SessionPlan,
    find_handle,
    resume_session,
    session_state,
    start_new_session,
)
from tempi.config.api_keys import has_configured_key
from tempi.config.errors import ConfigError
from tempi.config.models_json import load_model_registry
from tempi.config.paths import default_sessions_root, tempi_home
from tempi.config.settings import load_settings
from tempi.workers.temporal_client import TemporalUnreachable
from tempi.workflows.session_types import PromptRequest, RetryPolicySettings

SUBCOMMANDS = ("server", "worker", "attach", "steer", "follow-up", "abort")

EXAMPLES = """\
examples:
  tempi -p "fix the failing test in tests/test_api.py"
  tempi --mode json -p "list the files here"          pi's JSON event stream
  tempi --model anthropic/claude-sonnet-4-5:high -p "..."
  tempi --continue -p "now add a docstring"            continue the latest session here
  tempi attach SESSION_ID                              watch a running session
  tempi steer SESSION_ID "stop, do X instead"          redirect it from any terminal
  tempi server status | stop                           the shared background server

Sessions run in Temporal workflows: closing this terminal does not stop them.
"""


class UserError(Exception):
    """Something the user can fix; printed without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tempi",
        description="tempi: a durable coding agent (pi, on Temporal).",
        epilog=EXAMPLES + "\nsubcommands: " + ", ".join(SUBCOMMANDS) + " (tempi SUBCOMMAND --help)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("messages", nargs="*", help="the prompt (several are sent one after another)")
    p.add_argument("-p", "--print", dest="print_mode", action="store_true", help="run the prompt and print the answer")
    p.add_argument("--mode", choices=["text", "json"], default="text", help="output: final text, or pi's JSON events")
    p.add_argument("--provider", help="model provider, e.g. anthropic, openai")
    p.add_argument("--model", help="model id, provider/id, optionally with :thinking (e.g. openai/gpt-5:high)")
    p.add_argument("--thinking", choices=["off", "minimal", "low", "medium", "high", "xhigh"])
    p.add_argument("--system-prompt", help="replace tempi's system prompt (text or a file path)")
    p.add_argument("--append-system-prompt", action="append", default=[], help="add to the system prompt (text or file)")
    p.add_argument("--tools", help=f"comma-separated tools to enable (of {', '.join(ALL_TOOLS)})")
    p.add_argument("--no-tools", action="store_true", help="no tools at all")
    p.add_argument("--continue", dest="continue_", action="store_true", help="continue the latest session in this directory")
    p.add_argument("--session", help="continue a session by id, id prefix or file path")
    p.add_argument("--session-dir", help="where new session files go")
    p.add_argument("--no-worker", action="store_true", help="rely on workers elsewhere (with TEMPORAL_ADDRESS)")
    return p


def _text_or_file(value: str) -> str:
    path = Path(value).expanduser()
    if len(value) < 4096 and path.is_file():
        return path.read_text(encoding="utf-8")
    return value


def _plan(args: argparse.Namespace, cwd: Path) -> SessionPlan:
    try:
        settings = load_settings(cwd)
        registry = load_model_registry()
        selection = select_model(
            registry,
            args.provider,
            args.model,
            default_provider=settings.default_provider,
            default_model=settings.default_model,
            key_available=lambda provider: has_configured_key(provider, registry),
        )
    except (ModelSelectionError, ConfigError) as err:
        raise UserError(str(err)) from err
    if args.no_tools:
        tools: list[str] = []
    elif args.tools:
        tools = [t.strip() for t in args.tools.split(",") if t.strip()]
        unknown = [t for t in tools if t not in ALL_TOOLS]
        if unknown:
            raise UserError(f"Unknown tool(s): {', '.join(unknown)}. Available: {', '.join(ALL_TOOLS)}")
    else:
        tools = list(DEFAULT_TOOLS)
    thinking = args.thinking or selection.thinking_level or settings.default_thinking_level or "off"
    prompt = build_system_prompt(
        tools=tools,
        cwd=str(cwd),
        today=time.strftime("%Y-%m-%d"),
        custom_prompt=_text_or_file(args.system_prompt) if args.system_prompt else None,
        append=[_text_or_file(a) for a in args.append_system_prompt],
    )
    retry = settings.retry
    return SessionPlan(
        cwd=str(cwd),
        model=selection.model,
        thinking_level=thinking,
        system_prompt=prompt,
        tools=tools,
        retry=RetryPolicySettings(
            enabled=retry.enabled,
            max_retries=retry.max_retries,
            base_delay_ms=retry.base_delay_ms,
            max_delay_ms=retry.max_delay_ms,
        ),
        steering_mode=settings.steering_mode,
        follow_up_mode=settings.follow_up_mode,
    )


def _prompt_text(args: argparse.Namespace) -> list[str]:
    messages = list(args.messages)
    if not sys.stdin.isatty():
        piped = sys.stdin.read()
        if piped.strip():
            messages = [piped + ("\n\n" + messages[0] if messages else ""), *messages[1:]]
    return messages


async def run_print(args: argparse.Namespace) -> int:
    cwd = Path.cwd().resolve()
    messages = _prompt_text(args)
    if not messages:
        raise UserError("Nothing to do: give a prompt, e.g. tempi -p \"explain this repo\" (see tempi --help).")
    plan = _plan(args, cwd)
    store = SessionStore(default_sessions_root())
    async with open_runtime(no_worker=args.no_worker, quiet=args.mode == "json") as rt:
        if args.session or args.continue_:
            path = _find_session_path(store, args, cwd)
            handle, config = await resume_session(
                rt.client, store, path, plan, override_model=bool(args.model or args.provider)
            )
        else:
            session_dir = Path(args.session_dir).expanduser() if args.session_dir else None
            handle, config = await start_new_session(rt.client, store, plan, session_dir=session_dir)
        if args.mode == "json":
            header = {
                "type": "session",
                "version": 3,
                "id": config.session_id,
                "timestamp": config.created_at or "",
                "cwd": config.cwd,
            }
            print(json.dumps(header), flush=True)
        follower = EventFollower(handle, config.session_path, config.session_id)
        start = await follower.poll()  # skip what happened before this prompt
        del start
        final: dict[str, Any] | None = None
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, lambda: asyncio.ensure_future(handle.signal("abort")))
        for text in messages:
            try:
                await handle.execute_update("prompt", PromptRequest(message=text))
            except WorkflowUpdateFailedError as err:
                raise UserError(f"The session refused the prompt: {err.cause or err}") from err
            async for event in follower.events(until_idle=True):
                if args.mode == "json":
                    print(json.dumps(event, ensure_ascii=False), flush=True)
                if event["type"] == "message_end" and event["message"].get("role") == "assistant":
                    final = event["message"]
            if final and final.get("stopReason") in ("error", "aborted"):
                break
    return _finish(final, args.mode)


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


def _find_session_path(store: SessionStore, args: argparse.Namespace, cwd: Path) -> Path:
    if args.session:
        try:
            return store.find_session(args.session)
        except Exception as err:
            raise UserError(str(err)) from err
    latest = store.most_recent(str(cwd))
    if latest is None:
        raise UserError(f"No earlier session in {cwd} to continue. Start one with tempi -p \"...\".")
    return latest


# --- subcommands ---------------------------------------------------------------------


async def cmd_remote(argv: list[str], name: str) -> int:
    p = argparse.ArgumentParser(prog=f"tempi {name}", description=_REMOTE_HELP[name])
    p.add_argument("session", help="session id, id prefix or file path")
    if name in ("steer", "follow-up"):
        p.add_argument("message", help="the message to deliver")
    if name == "attach":
        p.add_argument("--from-now", action="store_true", help="skip what already happened")
        p.add_argument("--mode", choices=["text", "json"], default="text")
    p.add_argument("--no-worker", action="store_true", help="rely on workers elsewhere (with TEMPORAL_ADDRESS)")
    args = p.parse_args(argv)
    store = SessionStore(default_sessions_root())
    async with open_runtime(no_worker=args.no_worker, quiet=True) as rt:
        try:
            handle = await find_handle(rt.client, store, args.session)
        except SessionNotFound as err:
            raise UserError(str(err)) from err
        if name == "steer":
            await handle.signal("steer", args.message)
        elif name == "follow-up":
            await handle.signal("follow_up", args.message)
        elif name == "abort":
            await handle.signal("abort")
        else:
            state = await session_state(handle)
            follower = EventFollower(handle, state.session_file, state.session_id)
            if args.from_now:
                await follower.poll()
            async for event in follower.events(until_idle=False):
                if args.mode == "json":
                    print(json.dumps(event, ensure_ascii=False), flush=True)
                else:
                    _print_readable(event)
    return 0


_REMOTE_HELP = {
    "attach": "Show the live events of a running session, from its start or from now.",
    "steer": "Send a steering message to a running session (delivered after the current tool).",
    "follow-up": "Queue a message for when the running session would otherwise stop.",
    "abort": "Abort the current run of a session; the session stays usable.",
}


def _print_readable(event: dict[str, Any]) -> None:
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


async def cmd_server(argv: list[str]) -> int:
    from tempi.workers.service import read_info, serve, stop_service

    p = argparse.ArgumentParser(
        prog="tempi server",
        description="Run Temporal's dev server with a tempi worker in the foreground (web UI included), "
        "or manage the shared background one.",
    )
    p.add_argument("action", nargs="?", choices=["status", "stop"], help="status or stop the background server")
    p.add_argument("--port", type=int, default=7233, help="gRPC port (default 7233; the UI listens on port+1000)")
    args = p.parse_args(argv)
    home = tempi_home()
    if args.action == "status":
        info = read_info(home)
        if info is None:
            print("tempi server: not running (it starts on demand)")
            return 0
        up = int(time.time() - info.started)
        print(f"tempi server: running at {info.address} (pid {info.pid}, up {up // 60} min {up % 60} s)")
        return 0
    if args.action == "stop":
        print("tempi server: stopped" if stop_service(home) else "tempi server: was not running")
        return 0
    print(f"Temporal dev server on 127.0.0.1:{args.port}, web UI http://127.0.0.1:{args.port + 1000}", flush=True)
    await serve(home / "foreground", port=args.port, idle_minutes=0, ui_port=args.port + 1000)
    return 0


async def cmd_worker(argv: list[str]) -> int:
    from tempi.workers.temporal_client import configured_address, connect
    from tempi.workers.worker import build_worker

    p = argparse.ArgumentParser(
        prog="tempi worker",
        description="Run a tempi worker against TEMPORAL_ADDRESS (or the background server).",
    )
    p.parse_args(argv)
    address = configured_address()
    if address is None:
        from tempi.workers.service import ensure_service

        address = ensure_service(tempi_home()).address
    client = await connect(address)
    worker = build_worker(client, sessions_root=default_sessions_root())
    print(f"tempi worker: polling {address}", file=sys.stderr, flush=True)
    await worker.run()
    return 0


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            name, rest = argv[0], argv[1:]
            if name == "server":
                code = asyncio.run(cmd_server(rest))
            elif name == "worker":
                code = asyncio.run(cmd_worker(rest))
            else:
                code = asyncio.run(cmd_remote(rest, name))
        else:
            args = build_parser().parse_args(argv)
            if not args.print_mode and not args.messages and sys.stdin.isatty() and args.mode == "text":
                build_parser().print_help()
                print("\nThe interactive terminal mode is not built yet; use -p.", file=sys.stderr)
                code = 2
            else:
                code = asyncio.run(run_print(args))
    except UserError as err:
        print(f"tempi: {err}", file=sys.stderr)
        code = 1
    except TemporalUnreachable as err:
        print(f"tempi: {err}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)
