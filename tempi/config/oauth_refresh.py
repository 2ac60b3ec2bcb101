"""Logins of pi's three OAuth providers: the key a login gives, refreshed when it expires.

As pi 0.73.1 (utils/oauth/*.js, auth-storage.js): the key is the entry's `access` token while
`now < expires`; after that the token is refreshed under auth.json's lock, the file read again
inside the lock first (pi or another worker may have refreshed it meanwhile), the new tokens
written and the lock released. A failed refresh leaves the provider without a key and says
to log in again.

Runs on the worker at call time (and in the CLI for `/logout`), never in workflow code.
The token endpoints can be moved for tests only, through TEMPI_TEST_OAUTH_TOKEN_URL_<PROVIDER>
(and Copilot's API through TEMPI_TEST_OAUTH_API_URL_GITHUB_COPILOT).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tempi.config.auth_json import Entries, auth_json_path, read_auth, update_auth
from tempi.config.errors import ConfigError
from tempi.config.token_endpoint import TIMEOUT_S, TokenEndpointError, json_object, unreachable

if TYPE_CHECKING:
    import httpx

FIVE_MINUTES_MS = 5 * 60 * 1000

# pi's public OAuth client ids (pi keeps the Anthropic and Copilot ones base64-encoded too).
ANTHROPIC_CLIENT_ID = base64.b64decode("OWQxYzI1MGEtZTYxYi00NGQ5LTg4ZWQtNTk0NGQxOTYyZjVl").decode()
CODEX_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
ANTHROPIC_TOKEN_URL = "https://platform.claude.com/v1/oauth/token"
CODEX_TOKEN_URL = "https://auth.openai.com/oauth/token"
_CODEX_CLAIM = "https://api.openai.com/auth"
COPILOT_HEADERS = {
    "User-Agent": "GitHubCopilotChat/0.35.0",
    "Editor-Version": "vscode/1.107.0",
    "Editor-Plugin-Version": "copilot-chat/0.35.0",
    "Copilot-Integration-Id": "vscode-chat",
}
COPILOT_DEFAULT_BASE_URL = "https://api.individual.githubcopilot.com"
# What a URL's host may hold (WHATWG's URL parser, which pi uses, refuses spaces and the like).
_HOST = re.compile(r"[A-Za-z0-9.-]+|[0-9A-Fa-f:.]+")

OAUTH_PROVIDER_NAMES = {
    "anthropic": "Anthropic (Claude Pro/Max)",
    "github-copilot": "GitHub Copilot",
    "openai-codex": "ChatGPT Plus/Pro (Codex Subscription)",
}


class RefreshFailed(Exception):
    """The token endpoint refused or could not be reached; the message holds no token."""


def test_url(kind: str, provider: str) -> str | None:
    """An endpoint a test put in place of the provider's real one: TEMPI_TEST_OAUTH_<KIND>_<PROVIDER>."""
    return os.environ.get(f"TEMPI_TEST_OAUTH_{kind}_" + provider.upper().replace("-", "_")) or None


def test_token_url(provider: str) -> str | None:
    return test_url("TOKEN_URL", provider)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _post(url: str, **kwargs: Any) -> dict[str, Any]:
    return _answer(url, lambda client: client.post(url, **kwargs))


def _answer(url: str, send: Callable[[httpx.Client], httpx.Response]) -> dict[str, Any]:
    import httpx  # only when a login expires: the CLI imports this module at every start

    try:
        with httpx.Client(timeout=TIMEOUT_S) as client:
            return json_object(send(client), url)
    except httpx.HTTPError as exc:
        raise RefreshFailed(str(unreachable(url, exc))) from None
    except TokenEndpointError as err:
        raise RefreshFailed(str(err)) from None


def _refresh_anthropic(credential: Entries) -> Entries:
    url = test_token_url("anthropic") or ANTHROPIC_TOKEN_URL
    data = _post(
        url,
        json={
            "grant_type": "refresh_token",
            "client_id": ANTHROPIC_CLIENT_ID,
            "refresh_token": credential["refresh"],
        },
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    access, refresh, expires_in = data.get("access_token"), data.get("refresh_token"), data.get("expires_in")
    if not isinstance(access, str) or not isinstance(expires_in, (int, float)):
        raise RefreshFailed(f"{url} answered without access_token or expires_in")
    return {
        "refresh": refresh,
        "access": access,
        "expires": _now_ms() + int(expires_in * 1000) - FIVE_MINUTES_MS,
    }


def codex_account_id(access_token: str) -> str | None:
    """The ChatGPT account id inside a Codex access token (a JWT), as pi reads it."""
    parts = access_token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    claim = payload.get(_CODEX_CLAIM) if isinstance(payload, dict) else None
    account = claim.get("chatgpt_account_id") if isinstance(claim, dict) else None
    return account if isinstance(account, str) and account else None


def _refresh_openai_codex(credential: Entries) -> Entries:
    url = test_token_url("openai-codex") or CODEX_TOKEN_URL
    data = _post(
        url,
        data={
            "grant_type": "refresh_token",
            "refresh_token": credential["refresh"],
            "client_id": CODEX_CLIENT_ID,
        },
    )
    access, refresh, expires_in = data.get("access_token"), data.get("refresh_token"), data.get("expires_in")
    if (
        not isinstance(access, str)
        or not isinstance(refresh, str)
        or not isinstance(expires_in, (int, float))
    ):
        raise RefreshFailed(f"{url} answered without access_token, refresh_token or expires_in")
    account = codex_account_id(access)
    if account is None:
        raise RefreshFailed(f"{url} answered with an access token that names no ChatGPT account")
    return {
        "access": access,
        "refresh": refresh,
        "expires": _now_ms() + int(expires_in * 1000),
        "accountId": account,
    }


def copilot_domain(enterprise: object) -> str | None:
    """The host a GitHub Enterprise URL or domain names (pi's normalizeDomain); None if blank
    or not a host."""
    if not isinstance(enterprise, str) or not enterprise.strip():
        return None
    text = enterprise.strip()
    try:
        host = urlsplit(text if "://" in text else f"https://{text}").hostname
    except ValueError:
        return None
    return host if host and _HOST.fullmatch(host) else None


def refresh_github_copilot(credential: Entries) -> Entries:
    """The Copilot token a GitHub token (the login's `refresh`) gets: also the last step of
    the login."""
    enterprise = credential.get("enterpriseUrl")
    domain = copilot_domain(enterprise) or "github.com"
    url = test_token_url("github-copilot") or f"https://api.{domain}/copilot_internal/v2/token"
    headers = {
        "Accept": "application/json",
        "Authorization": f"Bearer {credential['refresh']}",
        **COPILOT_HEADERS,
    }
    data = _answer(url, lambda client: client.get(url, headers=headers))
    token, expires_at = data.get("token"), data.get("expires_at")
    if not isinstance(token, str) or not isinstance(expires_at, (int, float)):
        raise RefreshFailed(f"{url} answered without token or expires_at")
    refreshed: Entries = {"refresh": credential["refresh"], "access": token}
    refreshed["expires"] = int(expires_at * 1000) - FIVE_MINUTES_MS
    if enterprise:
        refreshed["enterpriseUrl"] = enterprise
    return refreshed


_REFRESHERS: dict[str, Callable[[Entries], Entries]] = {
    "anthropic": _refresh_anthropic,
    "openai-codex": _refresh_openai_codex,
    "github-copilot": refresh_github_copilot,
}


def copilot_base_url(credential: Entries) -> str:
    """Where Copilot's API is for this login: its token's `proxy-ep` (`proxy.X` becomes
    `https://api.X`), else the enterprise's `copilot-api.` host, else the individual one."""
    moved = test_url("API_URL", "github-copilot")
    if moved:
        return moved
    match = re.search(r"proxy-ep=([^;]+)", str(credential.get("access", "")))
    if match:
        return "https://" + re.sub(r"^proxy\.", "api.", match.group(1))
    domain = copilot_domain(credential.get("enterpriseUrl"))
    return f"https://copilot-api.{domain}" if domain else COPILOT_DEFAULT_BASE_URL


def _fresh(credential: object) -> bool:
    return (
        isinstance(credential, dict)
        and credential.get("type") == "oauth"
        and isinstance(credential.get("expires"), (int, float))
        and _now_ms() < credential["expires"]
    )


def _login_again(provider: str, path: Path, why: str) -> ConfigError:
    return ConfigError(
        f'The {OAUTH_PROVIDER_NAMES[provider]} login for provider "{provider}" in {path} has expired and '
        f"could not be refreshed: {why}. Log in again with /login (tempi's or pi's: they share logins), or "
        f"remove the entry with /logout {provider} and use an API key."
    )


def oauth_api_key(provider: str, credential: Entries, path: Path | None = None) -> str | None:
    """The key an `oauth` entry of auth.json gives, refreshing it first when it expired.
    None for a provider without an OAuth flow (pi ignores such an entry)."""
    refresher = _REFRESHERS.get(provider)
    if refresher is None:
        return None
    if _fresh(credential):
        return str(credential["access"])
    path = path or auth_json_path()
    failure: list[str] = []

    def refresh(entries: Entries) -> Entries | None:
        current = entries.get(provider)
        if not isinstance(current, dict) or current.get("type") != "oauth" or _fresh(current):
            return None  # logged out, or refreshed by someone else while we waited
        try:
            renewed = refresher(current)
        except (RefreshFailed, KeyError) as exc:
            failure.append(str(exc) if isinstance(exc, RefreshFailed) else "the entry has no refresh token")
            return None
        return {**entries, provider: {"type": "oauth", **renewed}}

    try:
        entries = update_auth(refresh, path)
    except ConfigError as exc:
        # As pi: perhaps another program refreshed it while we could not get the lock.
        entries = read_auth(path)
        if not _fresh(entries.get(provider)):
            raise _login_again(provider, path, str(exc)) from None
    current = entries.get(provider)
    if _fresh(current):
        return str(current["access"])  # type: ignore[index]
    if not isinstance(current, dict) or current.get("type") != "oauth":
        return None
    raise _login_again(provider, path, failure[0] if failure else "the token endpoint gave no new token")
