"""Temporal's codec server protocol over HTTP, so the Temporal UI and CLI show tempi's
encrypted history in the clear to those who hold the keys: POST `.../encode` and
`.../decode` with `{"payloads": [...]}` (protobuf JSON of Payloads), answered in kind."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from tempi.workers.codec import CodecKeyError, EncryptionCodec, KeyRing

AUTH_VARIABLE = "TEMPI_CODEC_AUTH_TOKEN"
# The UI sends X-Namespace; the CLI and the UI's "pass access token" send Authorization.
ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def codec_app(
    ring: KeyRing, *, cors_origins: Sequence[str] = (), auth_token: str | None = None
) -> web.Application:
    codec = EncryptionCodec(ring)
    origins = set(cors_origins)

    @web.middleware
    async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
        response = (
            web.Response(status=204) if request.method == "OPTIONS" else await _guarded(request, handler)
        )
        origin = request.headers.get("Origin")
        if origin and (origin in origins or "*" in origins):
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Methods"] = "POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            response.headers["Access-Control-Allow-Credentials"] = "true"
            response.headers["Vary"] = "Origin"
        return response

    async def _guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        if auth_token and not _authorized(request.headers.get("Authorization", ""), auth_token):
            return web.json_response({"message": "unauthorized: send the codec server's token"}, status=401)
        return await handler(request)

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
    # The UI and CLI put a namespace or prefix in front (`/default/decode`); any path ending
    # in /encode or /decode is served.
    app.router.add_post(r"/{prefix:(.*/)?}encode", endpoint(True))
    app.router.add_post(r"/{prefix:(.*/)?}decode", endpoint(False))
    return app


def _authorized(header: str, token: str) -> bool:
    given = header.removeprefix("Bearer ").strip()
    return hmac.compare_digest(given.encode(), token.encode())
