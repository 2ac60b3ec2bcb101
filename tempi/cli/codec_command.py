"""`tempi codec-server`: decrypts tempi's Temporal history for the Temporal UI and CLI."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from aiohttp import web

from tempi.workers.codec import KEYS_FILE_VARIABLE, KEYS_VARIABLE, CodecKeyError, load_key_ring
from tempi.workers.codec_server import AUTH_VARIABLE, codec_app

EPILOG = f"""\
examples:
  {KEYS_VARIABLE}=k1:$(openssl rand -base64 32) tempi codec-server --cors-origin http://localhost:8233
  temporal workflow show -w session-ID --codec-endpoint http://127.0.0.1:8081

The keys are those of the workers ({KEYS_VARIABLE} or {KEYS_FILE_VARIABLE}). With
{AUTH_VARIABLE} set, a request must carry `Authorization: Bearer TOKEN`
(`temporal ... --codec-auth "Bearer TOKEN"`). Whoever reaches this server can read every
session's history: keep it on localhost or behind that token.
"""


async def cmd_codec_server(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="tempi codec-server",
        description="Serve Temporal's codec protocol (POST /encode, /decode) with tempi's keys, so "
        "`temporal workflow show --codec-endpoint` and the Temporal UI show encrypted sessions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8081, help="port (default 8081; 0 picks a free one)")
    p.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="URL",
        help="a web UI origin allowed to call it, e.g. http://localhost:8233 (repeatable)",
    )
    args = p.parse_args(argv)
    ring = load_key_ring()
    if ring is None:
        raise CodecKeyError(
            f"tempi codec-server needs the workers' keys: set {KEYS_VARIABLE} or {KEYS_FILE_VARIABLE}."
        )
    app = codec_app(ring, cors_origins=args.cors_origin, auth_token=os.environ.get(AUTH_VARIABLE) or None)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    port = runner.addresses[0][1]
    print(
        f"tempi codec-server: http://{args.host}:{port} (keys {', '.join(ring.ids)}; newest encrypts)",
        file=sys.stderr,
        flush=True,
    )
    try:
        await asyncio.Event().wait()  # until interrupted
    finally:
        await runner.cleanup()
    return 0
