"""The provider options of a model call, with its credentials resolved on the worker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio.exceptions import ApplicationError

from tempi.activities.llm import StreamOptions
from tempi.activities.llm.contract import SDK_RETRIES
from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.config.errors import ConfigError
from tempi.config.settings import Settings

CONFIGURATION_ERROR = "ConfigurationError"

CredentialResolver = Callable[[ModelSpec], tuple[str | None, dict[str, str]]]
"""(api key, extra headers) for a model, resolved where the call runs."""


async def stream_options(
    credentials: CredentialResolver,
    model: ModelSpec,
    thinking_level: ThinkingLevel,
    session_id: str,
    settings: Settings,
) -> StreamOptions:
    """Provider options with the credentials resolved here, on the worker (in a thread: a
    `!command` may run, or an expired login wait for auth.json's lock and refresh)."""
    try:
        api_key, headers = await asyncio.to_thread(credentials, model)
    except ConfigError as err:
        # A broken models.json or a failing `!command` does not heal by retrying every
        # few seconds while the user waits: end the turn now and say what to fix.
        raise ApplicationError(
            f"{err}\nFix the configuration and send the prompt again: the session keeps its place.",
            type=CONFIGURATION_ERROR,
            non_retryable=True,
        ) from None
    return StreamOptions(
        api_key=api_key,
        headers=headers,
        thinking_level=thinking_level,
        session_id=session_id,
        sdk_retries=SDK_RETRIES if (retries := settings.retry.provider.max_retries) is None else retries,
    )
