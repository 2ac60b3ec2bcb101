"""Token endpoints of pi's three OAuth providers, answering refreshes and logins' code
exchanges from scripted tokens.

As the real ones speak (pi 0.73.1's utils/oauth/*.js): Anthropic takes a JSON body, OpenAI
(Codex) a form, both answering `{access_token, refresh_token, expires_in}`; GitHub Copilot's
is a GET with the GitHub token as Bearer, answering `{token, expires_at}`. Each refresh token
is good once, as with real rotation, so two programs refreshing the same login without a
shared lock show up as a refused second refresh. A test can hold answers back (`hold()`) to
keep a refreshing program inside its lock. A code exchange (`grant_type=authorization_code`)
is answered only when the login endpoints (oauth_logins.py) issued that code for the verifier.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict, deque
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel

from tempi.testing.scripted_llm.oauth_logins import OAuthLoginEndpoints

OAuthProvider = Literal["anthropic", "openai-codex", "github-copilot"]

_PATHS: dict[str, str] = {
    "anthropic": "/oauth/anthropic/v1/oauth/token",
    "openai-codex": "/oauth/openai-codex/oauth/token",
    "github-copilot": "/oauth/github-copilot/copilot_internal/v2/token",
}


class TokenRequest(BaseModel):
    provider: str
    method: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int = 0


class _Issue(BaseModel):
    access: str
    refresh: str | None
    expires_in: int
    status: int


class OAuthTokenEndpoints:
    def __init__(self) -> None:
        self._queued: dict[str, deque[_Issue]] = defaultdict(deque)
        self._valid_refresh: dict[str, str] = {}
        self._requests: list[TokenRequest] = []
        self._open = threading.Event()
        self._open.set()
        self._arrived = threading.Condition()
        self.login = OAuthLoginEndpoints()

    # -- what tests use ----------------------------------------------------------------

    def url(self, base_url: str, provider: OAuthProvider) -> str:
        return base_url + _PATHS[provider]

    def issue(
        self,
        provider: OAuthProvider,
        access: str,
        *,
        refresh: str | None = None,
        expires_in: int = 3600,
        accept_refresh: str | None = None,
        status: int = 200,
    ) -> None:
        """Answer the next refresh of `provider` with these tokens (or with `status`).
        `accept_refresh`: the one refresh token that may be redeemed next."""
        if accept_refresh is not None:
            self._valid_refresh[provider] = accept_refresh
        self._queued[provider].append(
            _Issue(access=access, refresh=refresh, expires_in=expires_in, status=status)
        )

    def requests_for(self, provider: str) -> list[TokenRequest]:
        return [r for r in self._requests if r.provider == provider]

    def reset(self) -> None:
        """Forget scripted tokens and recorded requests (a new test on a shared server)."""
        with self._arrived:
            self._queued.clear()
            self._valid_refresh.clear()
            self._requests.clear()
        self.login.reset()
        self._open.set()

    def hold(self) -> None:
        """Keep every answer back until `release()`."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def wait_for_request(self, provider: str, count: int = 1, timeout: float = 60.0) -> bool:
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self.requests_for(provider)) >= count, timeout)

    # -- serving -----------------------------------------------------------------------

    def register(self, app: web.Application) -> None:
        self.login.register(app)
        for provider, path in _PATHS.items():
            method = "GET" if provider == "github-copilot" else "POST"
            app.router.add_route(method, path, self._handler(provider))

    def _handler(self, provider: str) -> Any:
        async def handle(request: web.Request) -> web.Response:
            return await self._handle(provider, request)

        return handle

    async def _handle(self, provider: str, request: web.Request) -> web.Response:
        if request.method == "POST" and request.content_type == "application/json":
            body: dict[str, Any] = await request.json()
        else:
            body = dict(await request.post())
        record = TokenRequest(
            provider=provider,
            method=request.method,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
        )
        with self._arrived:
            self._requests.append(record)
            self._arrived.notify_all()
        await asyncio.to_thread(self._open.wait)
        presented = (
            record.headers.get("authorization", "").removeprefix("Bearer ")
            if provider == "github-copilot"
            else str(body.get("refresh_token", ""))
        )
        expected = self._valid_refresh.get(provider)
        queued = self._queued[provider]
        if body.get("grant_type") == "authorization_code":
            refused = not self.login.redeem(body)
        else:
            refused = expected is not None and presented != expected
        if refused or not queued:
            record.status = 400
            return web.json_response({"error": "invalid_grant"}, status=400)
        issue = queued.popleft()
        record.status = issue.status
        if issue.status != 200:
            return web.json_response({"error": "server_error"}, status=issue.status)
        if issue.refresh is not None:
            self._valid_refresh[provider] = issue.refresh
        if provider == "github-copilot":
            return web.json_response(
                {"token": issue.access, "expires_at": int(time.time()) + issue.expires_in}
            )
        return web.json_response(
            {"access_token": issue.access, "refresh_token": issue.refresh, "expires_in": issue.expires_in}
        )
