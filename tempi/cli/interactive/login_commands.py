"""/login and /logout: logins live in auth.json, shared with pi.

tempi has no browser or device-code login of its own: `pi /login` writes the same auth.json,
which tempi reads (and refreshes) from then on. /logout removes a provider's entry, for pi too.
Neither ever shows a key or token.
"""

from __future__ import annotations

from tempi.cli.interactive.extras_host import ExtrasHost
from tempi.cli.interactive.render import notice
from tempi.config.auth_json import auth_json_path, read_auth, remove_entry
from tempi.config.errors import ConfigError
from tempi.config.oauth_refresh import OAUTH_PROVIDER_NAMES


def _stored() -> str:
    entries = read_auth()
    if not entries:
        return "none yet"
    return ", ".join(
        f"{provider} ({'login' if isinstance(e, dict) and e.get('type') == 'oauth' else 'API key'})"
        for provider, e in sorted(entries.items())
    )


def login_text() -> str:
    path = auth_json_path()
    providers = ", ".join(f"{name} ({pid})" for pid, name in OAUTH_PROVIDER_NAMES.items())
    try:
        stored = _stored()
    except ConfigError as err:
        stored = str(err)
    return (
        f"tempi shares pi's logins in {path}. Log in with `pi /login` ({providers}): tempi uses the "
        "login from then on and refreshes it when it expires, as pi does. An API key can go there too: "
        '{"<provider>": {"type": "api_key", "key": "<key, ENV_NAME or !command>"}}. '
        f"Stored now: {stored}."
    )


def logout_text(provider: str) -> tuple[str, str]:
    """The answer to `/logout provider`, and its colour; removes the entry."""
    path = auth_json_path()
    if not provider:
        return f"Usage: /logout <provider>. Stored in {path}: {_stored()}.", "yellow"
    if not remove_entry(provider, path):
        return f"No login or key for {provider} in {path}. Stored: {_stored()}.", "yellow"
    return f"Logged out of {provider}: removed from {path} (for pi too).", "green"


async def cmd_login(app: ExtrasHost, arg: str) -> None:
    await app.show(notice(login_text(), "yellow"))


async def cmd_logout(app: ExtrasHost, arg: str) -> None:
    try:
        text, colour = logout_text(arg.strip())
    except ConfigError as err:
        text, colour = str(err), "red"
    await app.show(notice(text, colour))
