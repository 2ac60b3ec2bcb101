"""The `tempi` command: flags and subcommands, dispatched to the modes."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.service import RPCError

from tempi.agent.messages import ImageContent
from tempi.cli.args import ignored_flags_note, parse_args
from tempi.cli.closed_pipe import CLOSED_PIPE_EXIT, flush_output, silence_stdout
from tempi.cli.command_words import SUBCOMMANDS
from tempi.cli.errors import UserError
from tempi.cli.html_export import default_export_path
from tempi.cli.initial_prompts import initial_prompts, opens_interactive
from tempi.cli.list_models import list_models
from tempi.cli.open_clients import ClientMark
from tempi.cli.pi_commands import PI_ONLY_COMMANDS, pi_command_answer
from tempi.cli.plan import check_api_key_reach, fixed_options, plan_run
from tempi.cli.rpc_io import ProtocolOut
from tempi.cli.slash_input import expand_input
from tempi.config.errors import ConfigError
from tempi.config.models_json import load_model_registry
from tempi.config.paths import ForeignHomeError, default_sessions_root, session_roots, tempi_home
from tempi.config.settings_writer import remember_choice
from tempi.store.session_store import SessionStore
from tempi.workers import telemetry
from tempi.workers.service import drop_unneeded
from tempi.workers.temporal_client import TemporalUnreachable, quiet_core_logs, server_gone
from tempi.workers.temporal_connection import TemporalSettingsError

if TYPE_CHECKING:
    from temporalio.client import Client

# A setting that cannot be used (as `tempi pipeline` exits): scripts tell it from a failed run.
EXIT_CONFIG = 3


async def run_session_command(args: argparse.Namespace) -> int:
    from tempi.cli.sandbox_reach import check_sandbox_reach
    from tempi.cli.session_choice import (
        OpenSession,
        choose_session,
        open_session,
        reopen_if_closed,
        session_folder,
    )

    cwd = Path.cwd().resolve()
    rpc = args.mode == "rpc"
    # RPC owns stdout from the start: nothing but protocol lines may reach it.
    out = ProtocolOut.take_over_stdout() if rpc else None
    prompts: list[str] = []
    images: list[ImageContent] = []
    if not rpc:
        prompts, images = initial_prompts(args, cwd, read_stdin=True)
    if not rpc and not prompts:
        raise UserError('Nothing to do: give a prompt, e.g. tempi -p "explain this repo" (see tempi --help).')
    planned = plan_run(args, cwd, one_shot=out is None)
    prompts = [expand_input(p, planned.templates, planned.skills) for p in prompts]
    store = SessionStore(*session_roots())
    choice = choose_session(store, args, planned.settings, cwd)
    folder = session_folder(choice, store, cwd)
    if folder is not None:
        check_sandbox_reach(planned.options.sandbox, cwd, folder)
    # Imported only now: the worker they bring in loads the provider SDKs, which commands
    # that fail early or only read files (--list-models, --export, sessions show) do without.
    from tempi.cli.extension_commands import command_context, prompts_after_extensions
    from tempi.cli.print_mode import run_print
    from tempi.cli.rpc_mode import run_rpc
    from tempi.cli.runtime import open_runtime
    from tempi.client import SessionService

    async with open_runtime(no_worker=args.no_worker, quiet=args.mode != "text") as rt:
        await check_api_key_reach(args, rt.client)
        service = SessionService(rt.client, store, remember=remember_choice)
        opened = await open_session(
            service,
            choice,
            planned.options,
            override_model=bool(args.model or args.provider),
            find_model=planned.registry.find,
            fixed=fixed_options(args),
        )
        mark = ClientMark(tempi_home(), args.mode)
        mark.show(opened.config.session_id, str(cwd), opened.config.session_path)
        try:
            if out is not None:
                return await run_rpc(service, planned, opened, out)
            prompts = await prompts_after_extensions(
                prompts,
                planned.options.extensions or [],
                command_context(
                    opened.config.session_id, opened.config.session_path, opened.config.cwd, has_ui=False
                ),
            )
            if not prompts:
                return 0  # the extensions' commands or input handlers sent nothing to the model

            async def reopen() -> OpenSession | None:
                nonlocal opened
                reopened = await reopen_if_closed(service, opened, planned.options, planned.registry.find)
                if reopened is not None:
                    opened = reopened  # cleaned up below in its place
                return reopened

            return await run_print(opened, prompts, images, args.mode, reopen)
        finally:
            mark.clear()
            await opened.close()


def _export(args: argparse.Namespace) -> int:
    from tempi.cli.session_choice import find_session_path
    from tempi.cli.sessions_command import export_html_file

    store = SessionStore(*session_roots())
    source = find_session_path(store, args.export)
    target = Path(args.messages[0]) if args.messages else default_export_path(source)
    export_html_file(store, source, target)
    return 0


def _list_models(search: str) -> int:
    try:
        registry = load_model_registry()
    except ConfigError as err:
        raise UserError(str(err)) from err
    print(list_models(registry, search))
    return 0


# --- server and worker -------------------------------------------------------------


async def cmd_server(argv: list[str]) -> int:
    from tempi.workers.service import read_info, serve

    p = argparse.ArgumentParser(
        prog="tempi server",
        description="Run Temporal's dev server with a tempi worker in the foreground (web UI included), "
        "or manage the shared background one that tempi starts on demand.",
        epilog="examples:\n  tempi server status\n  tempi server start        (any tempi command also starts it when needed)\n"
        "  tempi server stop         the next tempi command starts a fresh one\n"
        "  tempi server stop --force even while sessions run (they go on when it is back)\n"
        "  tempi server --port 7233  foreground; point others at it with TEMPORAL_ADDRESS=127.0.0.1:7233\n\n"
        "The foreground server listens on 127.0.0.1, where every local user can reach it and have\n"
        "its worker run workflows as you; the background one is reachable by you alone.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=["status", "start", "stop"],
        help="status, start or stop the background server",
    )
    p.add_argument(
        "--port", type=int, default=7233, help="gRPC port (default 7233; the UI listens on port+1000)"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="stop even while sessions are working or open in a terminal (they go on when it is back)",
    )
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
    if args.action == "start":
        from tempi.workers.service import ensure_service

        info = await asyncio.to_thread(ensure_service, home, quiet=True)
        print(f"tempi server: running at {info.address} (pid {info.pid})")
        return 0
    if args.action == "stop":
        from tempi.cli.server_stop import stop_server

        return await stop_server(home, SessionStore(*session_roots()), force=args.force)
    print(
        f"Temporal dev server on 127.0.0.1:{args.port}, web UI http://127.0.0.1:{args.port + 1000}",
        flush=True,
    )
    print(foreground_server_warning(args.port), file=sys.stderr, flush=True)
    await serve(home / "foreground", port=args.port, idle_minutes=0, ui_port=args.port + 1000)
    return 0


def foreground_server_warning(port: int) -> str:
    """What `tempi server --port` says at start: unlike the embedded server, it is open."""
    return (
        f"tempi: warning: the server on 127.0.0.1:{port} (and its web UI) accepts workflows from "
        f"every local user, and the worker started with it runs them as you: their model calls "
        f"with your API keys, their tools with your files. On a machine others use, run tempi "
        f"without `tempi server`: its default embedded server is reachable by you alone."
    )


async def cmd_worker(argv: list[str]) -> int:
    import logging

    from tempi.activities.sandbox_policy import KINDS, allowed_sandboxes
    from tempi.workers.codec import UNKNOWN_KEY_LOG, load_key_ring
    from tempi.workers.provider_preload import preload_default_provider
    from tempi.workers.secret_guard import forbid_inspection, withhold_secrets
    from tempi.workers.temporal_client import configured_address
    from tempi.workers.worker import GRACE_ENV, build_id, deployment_name, running_workers, shutdown_grace
    from tempi.workflows.session_types import DEFAULT_TASK_QUEUE

    p = argparse.ArgumentParser(
        prog="tempi worker",
        description="Run a tempi worker against TEMPORAL_ADDRESS (or the background server). "
        "It runs model calls and tools, so start it where the project files and API keys are.",
        epilog="examples:\n  TEMPORAL_ADDRESS=temporal.example.com:7233 ANTHROPIC_API_KEY=... tempi worker\n"
        "  TEMPI_DEPLOYMENT_NAME=tempi TEMPI_BUILD_ID=v2 tempi worker   "
        "# worker versioning (docs/operations.md)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--task-queue", default=DEFAULT_TASK_QUEUE, help=f"queue to poll (default {DEFAULT_TASK_QUEUE})"
    )
    args = p.parse_args(argv)
    try:
        grace = shutdown_grace()
        sandboxes = allowed_sandboxes()
        # Before anything else runs: no command this worker starts may inherit its secrets,
        # nor read them from its /proc files.
        withhold_secrets()
    except (ValueError, ConfigError) as err:
        print(f"tempi worker: {err}", file=sys.stderr)
        return EXIT_CONFIG
    forbid_inspection()
    # A key this worker lacks fails its workflow tasks with an error only an encrypted failure
    # in the history would show: say it where the operator rolling the workers looks.
    report = logging.StreamHandler(sys.stderr)
    report.setFormatter(logging.Formatter("tempi worker: %(message)s"))
    UNKNOWN_KEY_LOG.addHandler(report)
    telemetry.serve_metrics()
    address = configured_address()
    if address is None:
        from tempi.workers.service import ensure_service

        address = ensure_service(tempi_home()).address
    # SIGTERM is how `docker stop` and Kubernetes ask a container to end: without a handler
    # the worker died at once (as PID 1 it even ignored it until SIGKILL), so the model calls
    # it was running were paid again elsewhere and its commands came back "may or may not
    # have run".
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    client = await connect_until_reached(address, stop)
    if client is None:
        return 0
    deployment = deployment_name()
    async with running_workers(
        client,
        task_queue=args.task_queue,
        sessions_root=default_sessions_root(),
        deployment=deployment,
        grace=grace,
    ) as workers:
        queues = ", ".join(w.task_queue for w in workers)
        build = f" as build {build_id()} of deployment {deployment}" if deployment else ""
        tools = ", ".join(k for k in KINDS if k in sandboxes)
        ring = load_key_ring()
        # Which phase of a key rotation this worker is in, for whoever rolls the workers.
        codec = f"; codec keys: {ring.describe()}" if ring else ""
        print(
            f"tempi worker: polling {queues} on {address}{build}; tools run in: {tools}{codec}",
            file=sys.stderr,
            flush=True,
        )
        # While the first task is awaited, so that it does not pay the SDK import (1-3 s of CPU
        # that a busy worker would take from every session it runs meanwhile).
        preload = asyncio.create_task(preload_default_provider())
        adopt = asyncio.create_task(_first_build_current(client, deployment)) if deployment else None
        try:
            await stop.wait()
        finally:
            preload.cancel()
            if adopt is not None:
                adopt.cancel()
        print(
            f"tempi worker: stopping: no new work is taken; what runs has up to "
            f"{grace.total_seconds():g} s to finish ({GRACE_ENV}), then goes on elsewhere",
            file=sys.stderr,
            flush=True,
        )
    print("tempi worker: stopped", file=sys.stderr, flush=True)
    return 0


async def _first_build_current(client: Client, deployment: str) -> None:
    """A fresh deployment's first build made current, said on the worker's log."""
    from temporalio.service import RPCError

    from tempi.workers.first_build import adopt_if_first
    from tempi.workers.worker import build_id

    build = build_id()
    try:
        adopted = await adopt_if_first(client, deployment, build)
    except RPCError as err:
        print(
            f"tempi worker: could not make build {build} current in deployment {deployment}, which "
            f"has no current build ({err}): new sessions wait until one is. Run `temporal worker "
            f"deployment set-current-version --deployment-name {deployment} --build-id {build} --yes`.",
            file=sys.stderr,
            flush=True,
        )
        return
    if adopted:
        print(
            f"tempi worker: deployment {deployment} had no current build: made {build} current",
            file=sys.stderr,
            flush=True,
        )


async def connect_until_reached(address: str, stop: asyncio.Event) -> Client | None:
    """A client of `address`, waiting for the server as long as it takes (None once `stop` is
    set): a worker started before its server, or while the server restarts, would otherwise
    exit and crash-loop in its orchestrator."""
    from tempi.workers.temporal_client import TemporalUnreachable, connect

    delay = 1.0
    while True:
        try:
            return await connect(address)
        except TemporalUnreachable as err:
            print(f"tempi worker: {err} Trying again in {delay:g} s.", file=sys.stderr, flush=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
        if stop.is_set():
            return None
        delay = min(delay * 2, 30.0)


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in PI_ONLY_COMMANDS:
        raise UserError(pi_command_answer(argv[0]))
    if argv and argv[0] == "slack":
        from tempi.slack.command import cmd_slack

        return asyncio.run(cmd_slack(argv[1:]))
    if argv and argv[0] == "codec-server":
        from tempi.cli.codec_command import cmd_codec_server

        return asyncio.run(cmd_codec_server(argv[1:]))
    if argv and argv[0] == "web":
        from tempi.cli.web_command import cmd_web

        return asyncio.run(cmd_web(argv[1:]))
    if argv and argv[0] == "pipeline":
        from tempi.cli.pipeline_command import cmd_pipeline

        return cmd_pipeline(argv[1:])
    if argv and argv[0] in SUBCOMMANDS:
        name, rest = argv[0], argv[1:]
        if name == "server":
            return asyncio.run(cmd_server(rest))
        if name == "worker":
            return asyncio.run(cmd_worker(rest))
        if name == "sessions":
            from tempi.cli.sessions_command import cmd_sessions

            return asyncio.run(cmd_sessions(rest))
        if name == "mcp":
            from tempi.cli.mcp_command import cmd_mcp

            return asyncio.run(cmd_mcp(rest))
        from tempi.cli.remote_cmd import cmd_remote

        return asyncio.run(cmd_remote(rest, name))
    args = parse_args(argv)
    if note := ignored_flags_note(args):
        print(note, file=sys.stderr)
    if not args.print_mode and len(args.messages) == 1 and args.messages[0] in PI_ONLY_COMMANDS:
        # `tempi --continue list` means pi's command as much as `tempi list` does; -p says
        # the word is a prompt.
        raise UserError(pi_command_answer(args.messages[0]))
    if args.list_models is not None:
        return _list_models(args.list_models)
    if args.export:
        return _export(args)
    if opens_interactive(args):
        from tempi.cli.interactive.app import run_interactive

        return asyncio.run(run_interactive(args))
    return asyncio.run(run_session_command(args))


def _a_worker_in_front(argv: list[str]) -> bool:
    """`tempi worker` and `tempi server` in the foreground: their terminal is their log."""
    return argv[:1] == ["worker"] or (argv[:1] == ["server"] and not {"status", "stop"} & set(argv[1:]))


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not _a_worker_in_front(argv):
        quiet_core_logs()
    try:
        code = _dispatch(argv)
    except TemporalSettingsError as err:
        print(f"tempi: {err}", file=sys.stderr)
        code = EXIT_CONFIG
    except (UserError, TemporalUnreachable) as err:
        print(f"tempi: {err}", file=sys.stderr)
        code = 1
    except ForeignHomeError as err:
        print(f"tempi: {err}", file=sys.stderr)
        code = EXIT_CONFIG
    except RPCError as err:
        if server_gone(err):
            print(
                f"tempi: lost the Temporal server ({err}). The session is kept: `tempi server status` "
                "says whether it runs, and `tempi --continue` reopens the session.",
                file=sys.stderr,
            )
        else:
            print(f"tempi: the Temporal server answered with an error: {err}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        silence_stdout()
        code = CLOSED_PIPE_EXIT
    telemetry.flush()
    drop_unneeded()
    # Temporal's core runs native threads that can still be winding down when Python
    # finalizes, which aborts the process; everything is flushed, so skip finalization.
    if not flush_output():
        code = CLOSED_PIPE_EXIT
    os._exit(code)
