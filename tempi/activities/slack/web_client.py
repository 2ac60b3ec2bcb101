"""The Slack Web API client, built from the environment of the process it runs in, so the
bot token never enters workflow history."""

from __future__ import annotations

import os

from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

DEFAULT_API_URL = "https://slack.com/api/"


class SlackTokensMissing(RuntimeError):
    pass


def env_token(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def bot_token() -> str:
    token = env_token("MOM_SLACK_BOT_TOKEN", "SLACK_BOT_TOKEN")
    if token is None:
        raise SlackTokensMissing("Set MOM_SLACK_BOT_TOKEN (the bot's xoxb-… token) for `tempi slack`.")
    return token


def app_token() -> str:
    token = env_token("MOM_SLACK_APP_TOKEN", "SLACK_APP_TOKEN")
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
