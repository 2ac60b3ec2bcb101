"""`python -m tempi.testing.slack_server`: serve a scripted Slack workspace until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from tempi.testing.slack_server.control import DEFAULT_APP_TOKEN, DEFAULT_BOT_TOKEN
from tempi.testing.slack_server.server import ScriptedSlackServer

_HELP = """\
endpoints:
  POST|GET /api/<method>          the Web API (Authorization: Bearer <bot token>;
                                  apps.connections.open takes the app token)
  GET  /link/?ticket=...          Socket Mode (the URL comes from apps.connections.open)
  POST /_control/<action>         drive the workspace with a JSON body; actions: info,
                                  add_user, add_channel, open_dm, user_says, rate_limit,
                                  fail, revoke, disconnect, bot_messages, actions, calls, deliveries
"""


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tempi.testing.slack_server",
        description="Serve a scripted Slack workspace (Web API and Socket Mode) for one bot.",
        epilog=_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8788, help="port, 0 for any free port (default 8788)")
    parser.add_argument("--bot-token", default=DEFAULT_BOT_TOKEN, help="the bot token (xoxb-...) to accept")
    parser.add_argument("--app-token", default=DEFAULT_APP_TOKEN, help="the app token (xapp-...) to accept")
    parser.add_argument(
        "--ack-timeout", type=float, default=3.0, help="seconds before an unacked envelope is redelivered"
    )
    return parser.parse_args(argv)


async def _serve(server: ScriptedSlackServer) -> None:
    await server.start()
    print(f"scripted Slack server at {server.base_url}")
    print(f"  api_url    {server.api_url}")
    print(f"  bot token  {server.bot_token}")
    print(f"  app token  {server.app_token}")
    print(f"  control    {server.base_url}/_control/")
    sys.stdout.flush()
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopped.set)
    try:
        await stopped.wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    server = ScriptedSlackServer(
        host=args.host,
        port=args.port,
        bot_token=args.bot_token,
        app_token=args.app_token,
        ack_timeout=args.ack_timeout,
    )
    try:
        asyncio.run(_serve(server))
    except OSError as err:
        print(f"error: cannot listen on {args.host}:{args.port}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
