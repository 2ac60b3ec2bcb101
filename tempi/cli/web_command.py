"""`tempi web`: the browser console over the session API, served until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from aiohttp import web

from tempi.cli.errors import UserError
from tempi.config.errors import ConfigError
from tempi.config.loopback import is_loopback
from tempi.config.paths import default_sessions_root, tempi_home
from tempi.store.session_store import SessionStore
from tempi.web.access import TOKEN_FILE, TOKEN_VARIABLE, load_or_create_token, operator_token

DEFAULT_PORT = 8377

EPILOG = f"""\
examples:
  tempi web                              http://127.0.0.1:{DEFAULT_PORT}/?token=...
  tempi web --read-only --port 9000      a dashboard: watch, no controls
  TEMPORAL_ADDRESS=temporal:7233 tempi web --host 0.0.0.0   behind a TLS reverse proxy

Every request needs the token (in TEMPI_HOME/{TOKEN_FILE}; the printed URL carries it once,
then a cookie does). In a container, set {TOKEN_VARIABLE} (or {TOKEN_VARIABLE}_FILE) from a
secret instead: the URL is then printed without it. Off loopback the console speaks plain
HTTP: put a reverse proxy with TLS in front of it (docs/security.md).
"""


async def cmd_web(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="tempi web",
        description="A browser console for every session, pipeline and Slack conversation: the "
        "lists with cost totals, each session's live transcript and tree with prompt, steer, "
        "follow-up, abort, model, thinking, compact, branch switch, fork and export, and each "
        "pipeline's shards with its controls.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)"
    )
    p.add_argument("--read-only", action="store_true", help="show sessions but refuse every control")
    args = p.parse_args(argv)
    # Imported only now: the runtime brings in the Temporal client, `--help` does without.
    from tempi.cli.runtime import open_runtime
    from tempi.cli.server_link import link_for
    from tempi.client import SessionService
    from tempi.web.app import console_app

    try:
        given = operator_token()
    except ConfigError as err:
        raise UserError(str(err)) from err
    token = given or load_or_create_token(tempi_home())
    async with open_runtime(no_worker=True, quiet=True) as rt:
        service = SessionService(rt.client, SessionStore(default_sessions_root()))
        app = console_app(service, token, read_only=args.read_only, link=link_for(rt.embedded))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        # Open event streams are ended at once on Ctrl+C; the pages reconnect to the next console.
        site = web.TCPSite(runner, args.host, args.port, shutdown_timeout=1.0)
        await site.start()
        port = runner.addresses[0][1]
        shown = f"[{args.host}]" if ":" in args.host else args.host
        mode = " (read-only)" if args.read_only else ""
        # An operator's token stays out of the container's log: they know it already.
        query = f"?token=<{TOKEN_VARIABLE}>" if given else f"?token={token}"
        print(f"tempi web{mode}: http://{shown}:{port}/{query}", flush=True)
        print(
            f"tempi web: sessions on {rt.address}; Ctrl+C stops the console, not the sessions",
            file=sys.stderr,
        )
        if not is_loopback(args.host):
            print(
                f"tempi web: warning: listening on {args.host} without TLS; the token crosses the "
                "network in the clear unless a reverse proxy with TLS is in front (docs/security.md)",
                file=sys.stderr,
                flush=True,
            )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()
    return 0
