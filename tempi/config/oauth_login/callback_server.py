"""The local HTTP server a browser is redirected to at the end of an Anthropic or OpenAI
(Codex) login, as pi runs it: one path, a page saying how it went, the first good
redirect's query handed to the flow.

It listens on PI_OAUTH_CALLBACK_HOST (pi's variable; default 127.0.0.1) at the provider's
fixed port. Tests move the port with TEMPI_TEST_OAUTH_CALLBACK_PORT_<PROVIDER> (0: any free
port); the redirect URI then names the port taken.
"""

from __future__ import annotations

import asyncio
import html
import os
from collections.abc import Callable

from aiohttp import web

from tempi.config.oauth_refresh import test_url

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>
<body style="font-family: sans-serif; text-align: center; padding: 48px">
<h1>{title}</h1><p>{message}</p>{details}</body></html>"""

# A check of the redirect's query: None if it is the one awaited, else why not.
Judge = Callable[[dict[str, str]], tuple[str, str | None] | None]


def page(ok: bool, message: str, details: str | None = None) -> str:
    title = "Authentication successful" if ok else "Authentication failed"
    more = f"<pre>{html.escape(details)}</pre>" if details else ""
    return _PAGE.format(title=title, message=html.escape(message), details=more)


class CallbackServer:
    def __init__(self, runner: web.AppRunner, port: int, path: str) -> None:
        self._runner = runner
        self.redirect_uri = f"http://localhost:{port}{path}"
        self.arrived: asyncio.Future[dict[str, str] | None] = asyncio.get_running_loop().create_future()

    async def wait(self) -> dict[str, str] | None:
        return await asyncio.shield(self.arrived)

    async def close(self) -> None:
        if not self.arrived.done():
            self.arrived.set_result(None)
        await self._runner.cleanup()


def callback_port(provider: str, default: int) -> int:
    moved = test_url("CALLBACK_PORT", provider)
    return int(moved) if moved is not None else default


async def start_callback_server(port: int, path: str, judge: Judge, done_message: str) -> CallbackServer:
    """Listen for the redirect; OSError if the port is taken."""
    server: CallbackServer | None = None

    async def callback(request: web.Request) -> web.Response:
        query = dict(request.query)
        refused = judge(query)
        if refused is not None:
            return _html(400, page(False, *refused))
        if server is not None and not server.arrived.done():
            server.arrived.set_result(query)
        return _html(200, page(True, done_message))

    async def elsewhere(request: web.Request) -> web.Response:
        return _html(404, page(False, "Callback route not found."))

    app = web.Application()
    app.router.add_get(path, callback)
    app.router.add_route("*", "/{tail:.*}", elsewhere)
    # No access log: the redirect's query holds the authorization code.
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    host = os.environ.get("PI_OAUTH_CALLBACK_HOST") or "127.0.0.1"
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError:
        await runner.cleanup()
        raise
    server = CallbackServer(runner, int(runner.addresses[0][1]), path)
    return server


def _html(status: int, body: str) -> web.Response:
    return web.Response(status=status, text=body, content_type="text/html", charset="utf-8")
