"""`/api/<method>`: arguments as slack_sdk sends them, token checks, 429s, Slack's error shape."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from aiohttp import web

from tempi.testing.slack_server.holds import Holds
from tempi.testing.slack_server.outages import Outages
from tempi.testing.slack_server.paging import SlackError
from tempi.testing.slack_server.rate_limits import RateLimits
from tempi.testing.slack_server.records import ApiCall

logger = logging.getLogger("tempi.testing.slack_server")

Method = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
TokenKind = Literal["bot", "app"]

# Only apps.connections.open takes the app-level token; everything else the bot token.
APP_TOKEN_METHODS = frozenset({"apps.connections.open"})


class WebApi:
    def __init__(
        self,
        methods: dict[str, Method],
        bot_token: str,
        app_token: str,
        rate_limits: RateLimits,
        outages: Outages | None = None,
        holds: Holds | None = None,
    ) -> None:
        self.methods = methods
        self.bot_token = bot_token
        self.app_token = app_token
        self.rate_limits = rate_limits
        self.outages = outages or Outages()
        self.holds = holds or Holds()
        # Tokens revoked by the workspace (an app uninstalled, a token rotated).
        self.revoked: set[str] = set()
        self.calls: list[ApiCall] = []

    async def handle(self, request: web.Request) -> web.Response:
        name = request.match_info["method"]
        args: dict[str, Any] = {}
        try:
            args = await _arguments(request)
            # Slack takes the token from the Authorization header or, for forms, a `token` field.
            token = _bearer(request) or str(args.get("token") or "")
            args.pop("token", None)
            method = self.methods.get(name)
            if method is None:
                raise SlackError("unknown_method", status=404, req_method=name)
            failed = self.outages.take(name)
            if failed is not None:
                self._record(name, args, failed, "service_unavailable")
                return web.json_response({"ok": False, "error": "service_unavailable"}, status=failed)
            self._check_token(name, token)
            retry_after = self.rate_limits.take(name)
            if retry_after is not None:
                self._record(name, args, 429, "ratelimited")
                return web.json_response(
                    {"ok": False, "error": "ratelimited"},
                    status=429,
                    headers={"Retry-After": str(retry_after)},
                )
            hold = self.holds.take(name, args)
            if hold is not None and not hold.applied:
                # Lost on the way: Slack never sees it, the caller never hears back.
                await hold.released.wait()
                self._record(name, args, 503, "lost_in_flight")
                return web.json_response({"ok": False, "error": "lost_in_flight"}, status=503)
            body = await method(args)
            if hold is not None:
                # Done in Slack, but the answer stays in flight until the test lets it go.
                await hold.released.wait()
        except SlackError as err:
            self._record(name, args, err.status, err.code)
            return web.json_response({"ok": False, "error": err.code, **err.extra}, status=err.status)
        self._record(name, args, 200, None)
        return web.json_response({"ok": True, **body})

    def _check_token(self, name: str, token: str) -> None:
        if not token:
            raise SlackError("not_authed")
        if token in self.revoked:
            raise SlackError("token_revoked")
        wanted = self.app_token if name in APP_TOKEN_METHODS else self.bot_token
        if token == wanted:
            return
        if token in (self.app_token, self.bot_token):
            raise SlackError("not_allowed_token_type")
        raise SlackError("invalid_auth")

    def _record(self, name: str, args: dict[str, Any], status: int, error: str | None) -> None:
        logger.info("%s -> %d%s", name, status, f" {error}" if error else "")
        self.calls.append(ApiCall(method=name, args=args, status=status, error=error, at=time.time()))


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    return header[len("Bearer ") :].strip() if header.startswith("Bearer ") else None


async def _arguments(request: web.Request) -> dict[str, Any]:
    """Query string, then a form or JSON body: slack_sdk uses each, depending on the method."""
    args: dict[str, Any] = dict(request.query)
    if request.method != "POST" or not request.can_read_body:
        return args
    if request.content_type == "application/json":
        try:
            body = json.loads(await request.read() or b"{}")
        except ValueError:
            raise SlackError("invalid_json") from None
        if isinstance(body, dict):
            args.update(body)
        return args
    form = await request.post()
    args.update({key: value for key, value in form.items() if isinstance(value, str)})
    return args
