"""The login side of pi's three OAuth providers: GitHub's device flow, the authorize page of
Anthropic and OpenAI (Codex), and Copilot's model policy endpoint.

As the real ones speak (pi 0.73.1's utils/oauth/*.js). The device flow answers its polls from a
scripted list (`authorization_pending`, `slow_down`, the GitHub token). The authorize page stands
in for the browser's visit: it binds a one-time code to the PKCE challenge, redirect URI and
state it was asked with and redirects to the redirect URI; the token endpoint (oauth_tokens.py)
redeems the code only with the verifier whose S256 hash is that challenge.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import threading
from collections import deque
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit

from aiohttp import web
from pydantic import BaseModel

DEVICE_CODE_PATH = "/oauth/github-copilot/login/device/code"
ACCESS_TOKEN_PATH = "/oauth/github-copilot/login/oauth/access_token"
AUTHORIZE_PATH = "/oauth/{provider}/authorize"
POLICY_PATH = "/s/{scenario}/v1/models/{model}/policy"


class OAuthTokenEndpointsLike(Protocol):
    """oauth_tokens.OAuthTokenEndpoints (which imports this module)."""

    login: OAuthLoginEndpoints

    def requests_for(self, provider: str) -> list[Any]: ...


class LoginRequest(BaseModel):
    kind: str  # device_code, access_token, authorize, policy
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class _Grant(BaseModel):
    client_id: str
    redirect_uri: str
    challenge: str
    state: str


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


class OAuthLoginEndpoints:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[LoginRequest] = []
        self._device: dict[str, Any] | None = None
        self._polls: deque[dict[str, Any]] = deque()
        self._grants: dict[str, _Grant] = {}

    # -- what tests use ----------------------------------------------------------------

    def device_flow(self, device: dict[str, Any], polls: list[dict[str, Any]]) -> None:
        """Answer the next device code request with `device` and its polls, one by one, with
        `polls` (then `authorization_pending`)."""
        with self._lock:
            self._device = device
            self._polls = deque(polls)

    def grant(self, provider: str, authorize_url: str) -> tuple[str, str]:
        """What the provider's page does once the user agrees: a code for this authorization
        request, and the state to hand back with it."""
        query = dict(parse_qsl(urlsplit(authorize_url).query))
        code = f"{provider}-code-{secrets.token_hex(6)}"
        with self._lock:
            self._grants[code] = _Grant(
                client_id=query.get("client_id", ""),
                redirect_uri=query.get("redirect_uri", ""),
                challenge=query.get("code_challenge", ""),
                state=query.get("state", ""),
            )
        return code, query.get("state", "")

    def redeem(self, body: dict[str, Any]) -> bool:
        """Whether an authorization_code exchange matches its grant (once only), with the
        verifier whose hash is the challenge."""
        with self._lock:
            grant = self._grants.pop(str(body.get("code", "")), None)
        if grant is None:
            return False
        return (
            body.get("client_id") == grant.client_id
            and body.get("redirect_uri") == grant.redirect_uri
            and s256(str(body.get("code_verifier", ""))) == grant.challenge
            and body.get("state", grant.state) == grant.state
        )

    def requests(self, kind: str) -> list[LoginRequest]:
        with self._lock:
            return [r for r in self._requests if r.kind == kind]

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._device = None
            self._polls.clear()
            self._grants.clear()

    # -- serving -----------------------------------------------------------------------

    def register(self, app: web.Application) -> None:
        app.router.add_post(DEVICE_CODE_PATH, self._device_code)
        app.router.add_post(ACCESS_TOKEN_PATH, self._access_token)
        app.router.add_get(AUTHORIZE_PATH, self._authorize)
        app.router.add_post(POLICY_PATH, self._policy)

    async def _record(self, kind: str, request: web.Request) -> LoginRequest:
        if request.method == "GET":
            body: dict[str, Any] = dict(request.query)
        elif request.content_type == "application/json":
            body = await request.json()
        else:
            body = dict(await request.post())
        record = LoginRequest(
            kind=kind,
            method=request.method,
            path=request.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
        )
        with self._lock:
            self._requests.append(record)
        return record

    async def _device_code(self, request: web.Request) -> web.Response:
        await self._record("device_code", request)
        with self._lock:
            device = self._device
        if device is None:
            return web.json_response({"error": "no device flow scripted"}, status=404)
        return web.json_response(device)

    async def _access_token(self, request: web.Request) -> web.Response:
        record = await self._record("access_token", request)
        with self._lock:
            device = self._device or {}
            if record.body.get("device_code") != device.get("device_code"):
                return web.json_response({"error": "incorrect_device_code"})
            answer = self._polls.popleft() if self._polls else {"error": "authorization_pending"}
        # GitHub answers every poll with 200, the outcome in the body.
        return web.json_response(answer)

    async def _authorize(self, request: web.Request) -> web.Response:
        await self._record("authorize", request)
        provider = request.match_info["provider"]
        code, state = self.grant(provider, str(request.url))
        redirect = request.query.get("redirect_uri", "")
        raise web.HTTPFound(f"{redirect}?{urlencode({'code': code, 'state': state})}")

    async def _policy(self, request: web.Request) -> web.Response:
        await self._record("policy", request)
        return web.json_response({"state": "enabled"})


# Values that differ on every login (random, or a port); a comparison with pi's recording
# keeps their presence, not their value.
_VOLATILE_FIELDS = {"code", "code_verifier", "code_challenge", "state"}
# Headers every client sets its own way; the rest are what the flow chose to send.
_TRANSPORT_HEADERS = {
    "host",
    "content-length",
    "connection",
    "accept-encoding",
    "accept-language",
    "sec-fetch-mode",
}
_CLIENT_DEFAULT_AGENTS = ("node", "python-httpx/")


def _normalized(record: dict[str, Any]) -> dict[str, Any]:
    headers = {
        k: v
        for k, v in record["headers"].items()
        if k not in _TRANSPORT_HEADERS and not (k == "user-agent" and v.startswith(_CLIENT_DEFAULT_AGENTS))
    }
    if headers.get("accept") == "*/*":
        del headers["accept"]  # a client's default, not the flow's
    body = {
        k: ("<volatile>" if k in _VOLATILE_FIELDS else re.sub(r"localhost:\d+", "localhost:<port>", str(v)))
        for k, v in record["body"].items()
    }
    return {"kind": record["kind"], "method": record["method"], "headers": headers, "body": body}


def login_requests(endpoints: OAuthTokenEndpointsLike, provider: str) -> list[dict[str, Any]]:
    """What a login of `provider` asked of the endpoints, in the flow's order, normalized for a
    comparison with pi's (tests/fixtures/pi-0.73.1/oauth-logins/)."""
    login = endpoints.login
    records: list[dict[str, Any]] = []
    if provider == "github-copilot":
        records += [r.model_dump() for r in login.requests("device_code") + login.requests("access_token")]
    else:
        records += [
            r.model_dump() for r in login.requests("authorize") if r.path == f"/oauth/{provider}/authorize"
        ]
    records += [{**r.model_dump(), "kind": "token"} for r in endpoints.requests_for(provider)]
    if provider == "github-copilot":
        policies = sorted(login.requests("policy"), key=lambda r: r.path)
        records += [{**r.model_dump(), "kind": "policy " + r.path.rsplit("/", 2)[-2]} for r in policies]
    return [_normalized(r) for r in records]
