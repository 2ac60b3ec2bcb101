"""The Slack Web API client, built from the environment of the process it runs in, so the
bot token never enters workflow history."""

from __future__ import annotations

import os

from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

DEFAULT_API_URL = "https://slack.com/api/"


class SlackTokensMissing(RuntimeError):
    pass


# mom's names first; Slack's usual names also work.
BOT_TOKEN_VARIABLES = ("MOM_SLACK_BOT_TOKEN", "SLACK_BOT_TOKEN")
APP_TOKEN_VARIABLES = ("MOM_SLACK_APP_TOKEN", "SLACK_APP_TOKEN")


def token_variable(names: tuple[str, ...]) -> str:
    """The variable a token is read from: the first of `names` that is set (the first if none is)."""
    return next((name for name in names if os.environ.get(name, "").strip()), names[0])


def env_token(*names: str) -> str | None:
    value = os.environ.get(token_variable(names), "").strip()
    return value or None


def bot_token() -> str:
    token = env_token(*BOT_TOKEN_VARIABLES)
    if token is None:
        raise SlackTokensMissing("Set MOM_SLACK_BOT_TOKEN (the bot's xoxb-… token) for `tempi slack`.")
    return token


def app_token() -> str:
    token = env_token(*APP_TOKEN_VARIABLES)
    if token is None:
        raise SlackTokensMissing(
            "Set MOM_SLACK_APP_TOKEN (the app-level xapp-… token with connections:write) for `tempi slack`."
        )
    return token


def api_url() -> str:
    url = os.environ.get("TEMPI_SLACK_API_URL") or DEFAULT_API_URL
    return url if url.endswith("/") else url + "/"


def web_client() -> AsyncWebClient:
    """A Web client that waits out 429s as Slack's Retry-After says."""
    client = AsyncWebClient(token=bot_token(), base_url=api_url())
    client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=5))
    return client
