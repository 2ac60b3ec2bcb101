"""Who may use the console: a random token kept in a private file under TEMPI_HOME, given
once in the URL (as notebook servers do) and then carried by a cookie; controls must also
come from the console's own page (Origin), and none are taken in read-only mode.

The token is required on every bind, loopback included: another user of the machine can
reach 127.0.0.1 as well, and the console drives sessions that run with the owner's keys.
In a container the operator gives it instead (TEMPI_WEB_TOKEN, from a Secret): the
console's TEMPI_HOME is the shared session volume, and a token made there would only
reach the operator through the logs."""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import stat
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Middleware

from tempi.config.errors import ConfigError
from tempi.config.secret_files import secret_value
from tempi.store.modes import PRIVATE_FILE_MODE

TOKEN_FILE = Path("web") / "token"
TOKEN_VARIABLE = "TEMPI_WEB_TOKEN"
MIN_TOKEN_LENGTH = 32
COOKIE = "tempi_web_token"
HEADER = "X-Tempi-Token"
QUERY = "token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def load_or_create_token(home: Path) -> str:
    """The console's token: the one in TEMPI_HOME/web/token, or a new one written there
    (mode 0600). A file others could read is replaced: its token may have been seen."""
    path = home / TOKEN_FILE
    with contextlib.suppress(FileNotFoundError):
        info = path.stat()
        if info.st_uid == os.getuid() and not info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            token = path.read_text(encoding="utf-8").strip()
            if len(token) >= 32:
                return token
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    temp = path.with_name(f".token.{os.getpid()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    os.replace(temp, path)
    return token


def operator_token(env: Mapping[str, str] | None = None) -> str | None:
    """The token the operator set: TEMPI_WEB_TOKEN, the file TEMPI_WEB_TOKEN_FILE names, or
    that file in TEMPI_SECRETS_DIR; None when none is set. A variable set but empty (a
    compose service whose .env leaves it blank) or a short token is refused, never replaced
    by one made here."""
    environment = os.environ if env is None else env
    how = "`openssl rand -hex 32`: a token that goes into a URL as it is"
    token = secret_value(TOKEN_VARIABLE, env)
    if token is None and TOKEN_VARIABLE in environment:
        raise ConfigError(f"{TOKEN_VARIABLE} is set but empty: put the console's token in it ({how}).")
    if token is not None and len(token.strip()) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"{TOKEN_VARIABLE} is too short: the console's token needs at least "
            f"{MIN_TOKEN_LENGTH} characters ({how})."
        )
    return token.strip() if token is not None else None


def _same(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def _own_origin(request: web.Request) -> bool:
    """A control comes from the console's own pages: the browser's Origin (or, where a
    browser leaves it out, Referer) names the host the request was sent to."""
    origin = request.headers.get("Origin") or _origin_of(request.headers.get("Referer"))
    host = request.headers.get("Host")
    if not origin or not host:
        return False
    forwarded = request.headers.get("X-Forwarded-Proto")  # TLS ended at a reverse proxy
    schemes = {request.scheme, forwarded} if forwarded else {request.scheme}
    return any(origin == f"{scheme}://{host}" for scheme in schemes)


def _origin_of(referer: str | None) -> str | None:
    if not referer:
        return None
    scheme, _, rest = referer.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}" if rest else None


def access_middleware(token: str, *, read_only: bool) -> Middleware:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        given = request.query.get(QUERY)
        if request.method == "GET" and given is not None:
            if not _same(given, token):
                return _refused(request, 401, "wrong token: use the URL `tempi web` printed")
            # Into a cookie, and out of the address bar, the history and Referer headers.
            target = request.rel_url.with_query({k: v for k, v in request.query.items() if k != QUERY})
            redirect = web.Response(status=303, headers={"Location": str(target)})
            redirect.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
            return redirect
        if not (_same(request.cookies.get(COOKIE), token) or _same(request.headers.get(HEADER), token)):
            return _refused(
                request,
                401,
                "this console needs its token: open the URL `tempi web` printed "
                f"(the token is in TEMPI_HOME/{TOKEN_FILE})",
            )
        if request.method not in ("GET", "HEAD"):
            if not _own_origin(request):
                return _refused(request, 403, "refused: a control must come from the console's own page")
            if read_only:
                return _refused(request, 403, "this console is read-only (started with --read-only)")
        response = await handler(request)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        # The conversation is the model's and the tools' output: should markup get through
        # the renderer, it still runs no script and loads nothing from elsewhere.
        response.headers.setdefault("Content-Security-Policy", CSP)
        return response

    return guard


def _refused(request: web.Request, status: int, message: str) -> web.Response:
    if request.path.startswith("/api/"):
        return web.json_response({"error": message}, status=status)
    return web.Response(text=f"tempi web: {message}\n", status=status, content_type="text/plain")
