"""What every provider is given and what it must produce."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable

from pydantic import BaseModel, Field

from tempi.activities.llm.abort import AbortWatch
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.copilot_headers import COPILOT_PROVIDER, copilot_headers
from tempi.activities.llm.errors import ProviderError
from tempi.agent.llm_context import LlmContext
from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.agent.stream_events import AssistantMessageEvent

# pi never asks for more output than this unless the caller says so.
DEFAULT_MAX_TOKENS_CAP = 32_000

# pi-ai leaves the provider SDKs at their own default of two quiet retries of a failed
# request (5xx, 429, 408, 409, a lost connection) before the agent's retries
# (settings' retry.maxRetries) count at all; the same count here sends the same requests.
SDK_RETRIES = 2


class StreamOptions(BaseModel):
    """Per-call settings. Holds the API key, so it is built on the worker, never in history."""

    api_key: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    thinking_level: ThinkingLevel = "off"
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = None
    session_id: str | None = None
    timeout_s: float = Field(default=600, gt=0)
    # The SDK's own retries of a failed request (settings' retry.provider.maxRetries).
    sdk_retries: int = Field(default=SDK_RETRIES, ge=0)


ProviderStream = Callable[
    [ModelSpec, LlmContext, StreamOptions, MessageAssembler, AbortWatch],
    AsyncGenerator[AssistantMessageEvent, None],
]
"""Streams one call: yields the content events (never start/done/error, the caller owns
those), records usage, stop reason and response id on the assembler, and raises on failure."""


def output_token_limit(model: ModelSpec, options: StreamOptions) -> int:
    return options.max_tokens or min(model.max_tokens, DEFAULT_MAX_TOKENS_CAP)


def request_headers(
    model: ModelSpec,
    options: StreamOptions,
    provider_headers: dict[str, str] | None = None,
    context: LlmContext | None = None,
) -> dict[str, str]:
    """Model headers, then Copilot's per-request ones, overridden by the provider's own
    (`provider_headers`), overridden by per-call headers: pi's order."""
    dynamic = copilot_headers(context) if context is not None and model.provider == COPILOT_PROVIDER else {}
    return {**(model.headers or {}), **dynamic, **(provider_headers or {}), **options.headers}


def require_api_key(model: ModelSpec, options: StreamOptions) -> str:
    if not options.api_key:
        raise ProviderError(
            f"No API key for provider '{model.provider}' (model '{model.id}'). "
            "Set the provider's API key environment variable or configure one in models.json."
        )
    return options.api_key


def compat_flag(model: ModelSpec, name: str, default: bool) -> bool:
    value = (model.compat or {}).get(name)
    return value if isinstance(value, bool) else default
