"""The Slack tokens, checked before `tempi slack` starts anything: a token Slack refuses is
a one-line error naming its variable and Slack's error (as mom exits on `invalid_auth`),
while Slack being unreachable, failing (5xx) or rate limiting (429) is waited out, saying
so on stderr, since a network blip must not stop a bot that is started unattended."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TextIO, TypeVar

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tempi.activities.slack.web_client import (
    APP_TOKEN_VARIABLES,
    BOT_TOKEN_VARIABLES,
    api_url,
    app_token,
    bot_token,
    token_variable,
)

T = TypeVar("T")

# Slack's answers that mean the token itself is wrong: retrying cannot help.
_EXPIRED = {"token_revoked", "token_expired", "account_inactive", "team_disabled"}
_INVALID = {"invalid_auth", "not_authed"}
TOKEN_REFUSALS = _EXPIRED | _INVALID | {"not_allowed_token_type", "missing_scope"}
_TRANSIENT = {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 30.0


class BadSlackToken(Exception):
    """A token Slack refused; the message is one line for the user."""


def _kind_hint(variable: str, value: str) -> str:
    if variable in APP_TOKEN_VARIABLES:
        wanted = f"{variable} must be the app-level token (xapp-…) with the connections:write scope"
        return wanted + (": it holds a bot token (xoxb-…)" if value.startswith("xoxb-") else "")
    wanted = f"{variable} must be the bot token (xoxb-…)"
    return wanted + (": it holds an app-level token (xapp-…)" if value.startswith("xapp-") else "")


def refusal(variable: str, value: str, code: str, needed: str | None = None) -> str:
    """What to tell the user about a refused token (never the token itself)."""
    if code == "not_allowed_token_type":
        hint = _kind_hint(variable, value)
    elif code in _EXPIRED:
        hint = "the token was revoked or has expired (app uninstalled or token rotated?): set a current one"
    elif code == "missing_scope":
        hint = f"add the {needed or 'missing'} scope to the app and reinstall it"
    else:
        hint = "check it is copied whole from the app's settings page, for this workspace"
    return f"Slack refused {variable} ({code}): {hint}."


def _answer(err: SlackApiError) -> dict[str, Any]:
    data = err.response.data
    return data if isinstance(data, dict) else {}


async def with_retries(
    what: str,
    variable: str,
    value: str,
    call: Callable[[], Awaitable[T]],
    *,
    err: TextIO | None = None,
    first_delay: float = FIRST_DELAY_S,
) -> T:
    """`call()` until Slack answers: BadSlackToken when it refuses the token, other errors
    raised as they are; network failures, 5xx and 429 retried with a line on stderr."""
    out = err or sys.stderr
    delay = first_delay
    while True:
        wait = delay
        try:
            return await call()
        except SlackApiError as exc:
            answer = _answer(exc)
            code = str(answer.get("error") or "")
            if code in TOKEN_REFUSALS:
                raise BadSlackToken(refusal(variable, value, code, answer.get("needed"))) from None
            status = exc.response.status_code
            if code not in _TRANSIENT and status < 500 and status != 429:
                raise
            if status == 429:
                wait = max(wait, float(exc.response.headers.get("Retry-After") or 0))
            reason = f"Slack answered {code or 'HTTP ' + str(status)}"
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            reason = f"cannot reach Slack at {api_url()} ({str(exc) or type(exc).__name__})"
        print(f"tempi slack: {what}: {reason}; retrying in {wait:.0f}s", file=out, flush=True)
        await asyncio.sleep(wait)
        delay = min(delay * 2, MAX_DELAY_S)


def _plain_client(token: str) -> AsyncWebClient:
    # No retry handlers: the waits are with_retries', so each one shows.
    return AsyncWebClient(token=token, base_url=api_url(), retry_handlers=[])


async def check_bot_token() -> None:
    variable, value = token_variable(BOT_TOKEN_VARIABLES), bot_token()
    await with_retries("checking the bot token", variable, value, _plain_client(value).auth_test)


async def check_app_token() -> None:
    variable, value = token_variable(APP_TOKEN_VARIABLES), app_token()
    client = _plain_client(value)
    await with_retries(
        "checking the app token", variable, value, lambda: client.apps_connections_open(app_token=value)
    )


async def check_tokens() -> None:
    """Both tokens, bot first (as mom's start: auth.test, then the Socket Mode connection)."""
    await check_bot_token()
    await check_app_token()
