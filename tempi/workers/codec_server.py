"""Temporal's codec server protocol over HTTP, so the Temporal UI and CLI show tempi's
encrypted history in the clear to those who hold the keys: POST `.../encode` and
`.../decode` with `{"payloads": [...]}` (protobuf JSON of Payloads), answered in kind.

Browsers call it from the UI's page: a CORS preflight from an origin it was given is
answered with that origin, any other is refused (403). Who may call it: codec_auth.py."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence

import aiohttp
from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from tempi.workers.codec import CodecKeyError, EncryptionCodec, KeyRing
from tempi.workers.codec_auth import ISSUER_TIMEOUT_S, CodecAuth, IssuerUnreachable

CORS_VARIABLE = "TEMPI_CODEC_CORS_ORIGINS"
# The UI sends X-Namespace; the CLI and the UI's "pass access token" send Authorization.
ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization"
PREFLIGHT_MAX_AGE_S = "600"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def cors_origins(flags: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """The origins given with --cors-origin and in TEMPI_CODEC_CORS_ORIGINS (comma-separated)."""
    listed = (os.environ if env is None else env).get(CORS_VARIABLE, "")
    return [o.strip().rstrip("/") for o in [*flags, *listed.split(",")] if o.strip()]


def codec_app(ring: KeyRing, *, cors_origins: Sequence[str] = (), auth: CodecAuth) -> web.Application:
    codec = EncryptionCodec(ring)
    origins = set(cors_origins)
    issuer_client: list[aiohttp.ClientSession] = []

    def allowed_origin(request: web.Request) -> str | None:
        origin = request.headers.get("Origin")
        return origin if origin and (origin in origins or "*" in origins) else None

    @web.middleware
    async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = allowed_origin(request)
        if request.method == "OPTIONS":
            if origin is None:
                return web.json_response(
                    {
                        "message": f"origin {request.headers.get('Origin')!r} may not call this codec server "
                        f"(--cors-origin / {CORS_VARIABLE})"
                    },
                    status=403,
                )
            response: web.StreamResponse = web.Response(status=204)
            response.headers["Access-Control-Allow-Methods"] = "POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            response.headers["Access-Control-Max-Age"] = PREFLIGHT_MAX_AGE_S
        else:
            response = await _guarded(request, handler)
        if origin is not None:
            response.headers["Access-Control-Allow-Origin"] = origin
            # The UI's "include credentials" sends cookies, which a browser sends only when
            # the answer allows them.
            response.headers["Access-Control-Allow-Credentials"] = "true"
        response.headers["Vary"] = "Origin"
        return response

    async def _guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not auth.configured:
            return await handler(request)
        header = request.headers.get("Authorization", "")
        if auth.token_matches(header):
            return await handler(request)
        if auth.oidc is not None and header.startswith("Bearer ") and header[7:].strip():
            if not issuer_client:
                issuer_client.append(
                    aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=ISSUER_TIMEOUT_S))
                )
            try:
                email = await auth.oidc.user(header[7:].strip(), issuer_client[0])
            except IssuerUnreachable as err:
                return web.json_response({"message": f"cannot check the access token: {err}"}, status=503)
            if email is not None:
                if auth.oidc.admits(email):
                    return await handler(request)
                return web.json_response(
                    {"message": f"{email} may not read decrypted history (TEMPI_CODEC_OIDC_ALLOWED)"},
                    status=403,
                )
        return web.json_response(
            {
                "message": "unauthorized: send `Authorization: Bearer TOKEN` (the codec server's token, "
                "or the Temporal UI's access token with codec.passAccessToken)"
            },
            status=401,
        )

    async def close_issuer_client(_app: web.Application) -> None:
        for client in issuer_client:
            await client.close()

    def endpoint(encode: bool) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                payloads = json_format.Parse(await request.text(), Payloads())
            except json_format.ParseError as err:
                return web.json_response(
                    {"message": f'the body is not {{"payloads": [...]}}: {err}'}, status=400
                )
            try:
                done = await (codec.encode if encode else codec.decode)(list(payloads.payloads))
            except CodecKeyError as err:
                return web.json_response({"message": str(err)}, status=400)
            body = json_format.MessageToJson(Payloads(payloads=done))
            return web.Response(text=body, content_type="application/json")

        return handle

    app = web.Application(middlewares=[cors])
    app.on_cleanup.append(close_issuer_client)
    # The UI and CLI put a namespace or prefix in front (`/default/decode`); any path ending
    # in /encode or /decode is served.
    app.router.add_post(r"/{prefix:(.*/)?}encode", endpoint(True))
    app.router.add_post(r"/{prefix:(.*/)?}decode", endpoint(False))
    return app
