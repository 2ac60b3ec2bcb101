"""`tempi codec-server`: decrypts tempi's Temporal history for the Temporal UI and CLI."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from aiohttp import web

from tempi.workers.codec import KEYS_FILE_VARIABLE, KEYS_VARIABLE, CodecKeyError, load_key_ring
from tempi.workers.codec_auth import (
    ALLOWED_VARIABLE,
    ISSUER_VARIABLE,
    TOKEN_VARIABLE,
    load_auth,
    refuse_open_without_auth,
)
from tempi.workers.codec_server import CORS_VARIABLE, codec_app, cors_origins

EPILOG = f"""\
examples:
  {KEYS_VARIABLE}=k1:$(openssl rand -base64 32) tempi codec-server --cors-origin http://localhost:8233
  temporal workflow show -w session-ID --codec-endpoint http://127.0.0.1:8081

The keys are those of the workers ({KEYS_VARIABLE} or {KEYS_FILE_VARIABLE}). Whoever
reaches this server can read every session's history, so beyond 127.0.0.1 it needs one of:
  {TOKEN_VARIABLE}=TOKEN       requests carry `Authorization: Bearer TOKEN`
                               (`temporal ... --codec-auth "Bearer TOKEN"`)
  {ISSUER_VARIABLE}=URL       the Temporal UI's OIDC issuer: the UI, with
  {ALLOWED_VARIABLE}=...      TEMPORAL_CODEC_PASS_ACCESS_TOKEN=true and an https endpoint,
                               sends the signed-in user's access token, checked with the
                               issuer; emails, @domain or * say who may read.
Browser origins (the Temporal UI's) come from --cors-origin and {CORS_VARIABLE}.
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
        help=f"a web UI origin allowed to call it, e.g. http://localhost:8233 (repeatable; "
        f"or comma-separated in {CORS_VARIABLE})",
    )
    args = p.parse_args(argv)
    ring = load_key_ring()
    if ring is None:
        raise CodecKeyError(
            f"tempi codec-server needs the workers' keys: set {KEYS_VARIABLE} or {KEYS_FILE_VARIABLE}."
        )
    auth = load_auth(os.environ)
    refuse_open_without_auth(args.host, auth)
    origins = cors_origins(args.cors_origin)
    app = codec_app(ring, cors_origins=origins, auth=auth)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    port = runner.addresses[0][1]
    callers = [name for name, on in (("token", auth.token), ("OIDC", auth.oidc)) if on] or ["anyone local"]
    print(
        f"tempi codec-server: http://{args.host}:{port} (keys {', '.join(ring.ids)}, "
        f"{ring.describe()}; auth: {' or '.join(callers)}; origins: {', '.join(origins) or 'none'})",
        file=sys.stderr,
        flush=True,
    )
    try:
        await asyncio.Event().wait()  # until interrupted
    finally:
        await runner.cleanup()
    return 0
