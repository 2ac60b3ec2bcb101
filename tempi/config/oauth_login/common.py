"""What pi's three OAuth logins share: the callbacks a front end gives them (pi's
OAuthLoginCallbacks), PKCE, reading a pasted code or redirect URL, and JSON over HTTP whose
errors never carry a response body (it may echo a code or token)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tempi.config.auth_json import Entries
from tempi.config.token_endpoint import TIMEOUT_S, TokenEndpointError, json_object, unreachable


class LoginFailed(Exception):
    """A login that did not complete; the message names why and holds no code or token."""


@dataclass(frozen=True)
class Prompt:
    message: str
    placeholder: str | None = None
    allow_empty: bool = False


def _ignore(message: str) -> None:
    pass


@dataclass
class LoginCallbacks:
    # A URL for the user to open, and what to do there.
    on_auth: Callable[[str, str | None], None]
    # A question; the answer typed.
    on_prompt: Callable[[Prompt], Awaitable[str]]
    on_progress: Callable[[str], None] = field(default=_ignore)
    # Flows with a local callback server race it against this: the redirect URL pasted by a
    # user whose browser is on another machine.
    on_manual_code_input: Callable[[], Awaitable[str]] | None = None


Flow = Callable[[LoginCallbacks], Awaitable[Entries]]


def pkce() -> tuple[str, str]:
    """A code verifier and its S256 challenge, as pi makes them (32 random bytes, base64url)."""
    verifier = _base64url(secrets.token_bytes(32))
    return verifier, _base64url(hashlib.sha256(verifier.encode()).digest())


def _base64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def parse_authorization_input(text: str) -> tuple[str | None, str | None]:
    """(code, state) from what the user pasted: the redirect URL, `code#state`, a query string
    with `code=`, or the bare code (pi's parseAuthorizationInput)."""
    value = text.strip()
    if not value:
        return None, None
    if _SCHEME.match(value):
        return _code_and_state(urlsplit(value).query)
    if "#" in value:
        code, state = value.split("#", 1)
        return code, state
    if "code=" in value:
        return _code_and_state(value)
    return value, None


def _code_and_state(query: str) -> tuple[str | None, str | None]:
    fields = parse_qs(query)
    return next(iter(fields.get("code", [])), None), next(iter(fields.get("state", [])), None)


async def fetch_json(method: str, url: str, what: str, **kwargs: Any) -> dict[str, Any]:
    import httpx

    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            response = await client.request(method, url, **kwargs)
        return json_object(response, url)
    except httpx.HTTPError as exc:
        raise LoginFailed(f"{what}: {unreachable(url, exc)}") from None
    except TokenEndpointError as err:
        raise LoginFailed(f"{what}: {err}") from None


def issued_tokens(data: dict[str, Any], url: str) -> tuple[str, str, float]:
    """The access token, refresh token and lifetime (s) a token endpoint answered with."""
    access, refresh, expires_in = data.get("access_token"), data.get("refresh_token"), data.get("expires_in")
    if (
        not isinstance(access, str)
        or not isinstance(refresh, str)
        or not isinstance(expires_in, (int, float))
    ):
        raise LoginFailed(f"{url} answered without access_token, refresh_token or expires_in")
    return access, refresh, expires_in


async def browser_or_paste(
    redirected: Awaitable[dict[str, str] | None] | None,
    pasted: Callable[[], Awaitable[str]] | None,
) -> tuple[dict[str, str] | None, str | None]:
    """The callback server's query, or else the text the user pasted, whichever comes first
    (pi's race of waitForCode and onManualCodeInput). With no server (its port was taken)
    only the paste can answer."""
    server = asyncio.ensure_future(redirected) if redirected is not None else None
    manual = asyncio.ensure_future(pasted()) if pasted is not None else None
    try:
        if manual is None:
            return (await server if server is not None else None), None
        if server is not None:
            await asyncio.wait({server, manual}, return_when=asyncio.FIRST_COMPLETED)
            if server.done() and server.result():
                return server.result(), None
        return None, await manual
    finally:
        for task in (server, manual):
            if task is not None and not task.done():
                task.cancel()
