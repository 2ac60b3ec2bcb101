"""Who may use `tempi codec-server`: whoever reaches it reads every session's history.

Two kinds of caller, each with what it can send:

- The `temporal` CLI sends a fixed `Authorization` header (`--codec-auth "Bearer TOKEN"`):
  TEMPI_CODEC_AUTH_TOKEN holds that token.
- The Temporal UI, with `codec.passAccessToken` (TEMPORAL_CODEC_PASS_ACCESS_TOKEN=true) and its
  OIDC sign-in on, sends `Authorization: Bearer <the signed-in user's access token>` (and only
  to an https endpoint). TEMPI_CODEC_OIDC_ISSUER names the issuer the UI signs in with; the
  token is checked by asking that issuer's userinfo endpoint (from its OpenID discovery
  document), which works for opaque and JWT access tokens alike, and the user's email must
  match TEMPI_CODEC_OIDC_ALLOWED (`alice@example.com`, `@example.com`, or `*` for anyone the
  issuer signs in).

A verdict is kept a minute per token (by its hash), so the UI's burst of decode calls for one
page costs the issuer one request."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import aiohttp

from tempi.config.loopback import is_loopback
from tempi.workers.temporal_connection import TemporalSettingsError

TOKEN_VARIABLE = "TEMPI_CODEC_AUTH_TOKEN"
ISSUER_VARIABLE = "TEMPI_CODEC_OIDC_ISSUER"
ALLOWED_VARIABLE = "TEMPI_CODEC_OIDC_ALLOWED"
VERDICT_TTL_S = 60.0
ISSUER_TIMEOUT_S = 10.0


class CodecAuthError(TemporalSettingsError):
    """Authentication settings that cannot be used. Never holds a token."""


class IssuerUnreachable(RuntimeError):
    """The OIDC issuer did not answer: the caller is neither let in nor told it is refused."""


@dataclass
class OidcUsers:
    """Signed-in users of `issuer` whose email `allowed` lists."""

    issuer: str
    allowed: tuple[str, ...]
    _userinfo: str | None = None
    _verdicts: dict[str, tuple[float, str | None]] = field(default_factory=dict)

    def admits(self, email: str | None) -> bool:
        if not email:
            return False
        email = email.lower()
        return any(
            entry == "*" or entry == email or (entry.startswith("@") and email.endswith(entry))
            for entry in self.allowed
        )

    async def user(self, token: str, session: aiohttp.ClientSession) -> str | None:
        """The email the issuer vouches for with this access token, None if it does not."""
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        cached = self._verdicts.get(digest)
        if cached and cached[0] > now:
            return cached[1]
        endpoint = await self._userinfo_endpoint(session)
        try:
            async with session.get(endpoint, headers={"Authorization": f"Bearer {token}"}) as answer:
                email = (await answer.json(content_type=None)).get("email") if answer.status == 200 else None
        except (aiohttp.ClientError, TimeoutError, ValueError) as err:
            raise IssuerUnreachable(
                f"the OIDC issuer's userinfo endpoint {endpoint} did not answer ({err})"
            ) from None
        if len(self._verdicts) > 10_000:
            self._verdicts.clear()
        self._verdicts[digest] = (now + VERDICT_TTL_S, email if isinstance(email, str) else None)
        return self._verdicts[digest][1]

    async def _userinfo_endpoint(self, session: aiohttp.ClientSession) -> str:
        if self._userinfo is None:
            url = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
            try:
                async with session.get(url) as answer:
                    answer.raise_for_status()
                    endpoint = (await answer.json(content_type=None)).get("userinfo_endpoint")
            except (aiohttp.ClientError, TimeoutError, ValueError) as err:
                raise IssuerUnreachable(
                    f"the OIDC discovery document {url} could not be read ({err})"
                ) from None
            if not isinstance(endpoint, str):
                raise IssuerUnreachable(f"the OIDC discovery document {url} names no userinfo_endpoint")
            self._userinfo = endpoint
        return self._userinfo


@dataclass(frozen=True)
class CodecAuth:
    token: str | None = field(default=None, repr=False)
    oidc: OidcUsers | None = None

    @property
    def configured(self) -> bool:
        return bool(self.token or self.oidc)

    def token_matches(self, header: str) -> bool:
        given = header.removeprefix("Bearer ").strip()
        return bool(self.token) and hmac.compare_digest(given.encode(), (self.token or "").encode())


def load_auth(env: Mapping[str, str]) -> CodecAuth:
    issuer = env.get(ISSUER_VARIABLE, "").strip()
    allowed = tuple(e.strip().lower() for e in env.get(ALLOWED_VARIABLE, "").split(",") if e.strip())
    if issuer and not issuer.startswith(("https://", "http://")):
        raise CodecAuthError(
            f"{ISSUER_VARIABLE} must be the issuer's URL (https://...), as the UI's sign-in uses."
        )
    if issuer and not allowed:
        raise CodecAuthError(
            f"{ISSUER_VARIABLE} is set: set {ALLOWED_VARIABLE} to who may read decrypted history "
            "(emails, `@example.com` for a domain, or `*` for anyone the issuer signs in)."
        )
    if allowed and not issuer:
        raise CodecAuthError(f"{ALLOWED_VARIABLE} is set without {ISSUER_VARIABLE}: name the issuer too.")
    return CodecAuth(
        token=env.get(TOKEN_VARIABLE, "").strip() or None,
        oidc=OidcUsers(issuer, allowed) if issuer else None,
    )


def refuse_open_without_auth(host: str, auth: CodecAuth) -> None:
    """Decrypted history is served beyond this machine only to callers who authenticate."""
    if auth.configured or is_loopback(host):
        return
    raise CodecAuthError(
        f"codec-server will not serve decrypted history on {host} without authentication: "
        f'set {TOKEN_VARIABLE} (for `temporal ... --codec-auth "Bearer TOKEN"`), or '
        f"{ISSUER_VARIABLE} and {ALLOWED_VARIABLE} (for the Temporal UI's codec.passAccessToken), "
        "or listen on 127.0.0.1 (--host)."
    )
