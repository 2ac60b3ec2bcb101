"""Gemini API (`google-generative-ai`): `POST {baseUrl}/models/{model}:streamGenerateContent?alt=sse`
with the key in `x-goog-api-key` (see `google_shared` for the wire format)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from tempi.activities.llm.abort import AbortWatch
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.contract import StreamOptions, request_headers, require_api_key
from tempi.activities.llm.google_shared import build_request, stream_generate_content
from tempi.activities.llm.google_thinking import GoogleApi
from tempi.agent.llm_context import LlmContext
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent

API: GoogleApi = "google-generative-ai"
# The SDK's endpoint for a model without a base URL; the catalog's base URL is this one.
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"


def model_path(model_id: str) -> str:
    return model_id if model_id.startswith(("models/", "tunedModels/")) else f"models/{model_id}"


def request_url(model: ModelSpec) -> str:
    """The base URL holds the API version already (`…/v1beta`), as pi expects."""
    base = (model.base_url or DEFAULT_BASE_URL).rstrip("/")
    return f"{base}/{model_path(model.id)}:streamGenerateContent?alt=sse"


async def stream_google_generative_ai(
    model: ModelSpec,
    context: LlmContext,
    options: StreamOptions,
    assembler: MessageAssembler,
    abort: AbortWatch,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    api_key = require_api_key(model, options)
    headers = {**request_headers(model, options), "x-goog-api-key": api_key}
    hint = f'provider "{model.provider}": check GEMINI_API_KEY or the provider\'s apiKey in models.json'
    body = build_request(model, context, options, API)
    async for event in stream_generate_content(
        request_url(model), headers, body, options, assembler, abort, hint
    ):
        yield event
