"""Azure OpenAI Responses API (`azure-openai-responses`) over the `openai` SDK's Azure client.

The body and the stream are OpenAI Responses' (shared with `openai_responses`); Azure differs
in where the request goes and how it is authorised, all read from the worker's environment
at call time, as pi reads them:

- base URL: AZURE_OPENAI_BASE_URL, else https://<AZURE_OPENAI_RESOURCE_NAME>.openai.azure.com/openai/v1,
  else the model's baseUrl; an Azure host given without a path gets `/openai/v1`;
- `?api-version=` AZURE_OPENAI_API_VERSION (default `v1`); the key in the `api-key` header;
- body `model`: the deployment AZURE_OPENAI_DEPLOYMENT_NAME_MAP (`model=deployment,...`) names,
  else the model id.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import openai
from openai.types.responses import Response, ResponseStreamEvent

from tempi.activities.llm.abort import AbortWatch, relay_stream
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.contract import StreamOptions, output_token_limit, request_headers
from tempi.activities.llm.conversation_cache import CONVERSATIONS
from tempi.activities.llm.errors import ProviderError, describe_exception, with_setup_hint
from tempi.activities.llm.http_pool import shared_http_client
from tempi.activities.llm.openai_post import post_stream
from tempi.activities.llm.openai_responses import content_events, responses_input, sampling_fields
from tempi.activities.llm.thinking import responses_reasoning_when_off
from tempi.agent.llm_context import LlmContext
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent

API = "azure-openai-responses"
DEFAULT_API_VERSION = "v1"
_AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com")
SETUP_HINT = (
    "Azure OpenAI: check AZURE_OPENAI_API_KEY, AZURE_OPENAI_BASE_URL (or AZURE_OPENAI_RESOURCE_NAME), "
    "AZURE_OPENAI_API_VERSION and AZURE_OPENAI_DEPLOYMENT_NAME_MAP"
)


def deployment_name(model: ModelSpec, environ: Mapping[str, str]) -> str:
    for entry in environ.get("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", "").split(","):
        model_id, _, deployment = entry.strip().partition("=")
        if model_id.strip() == model.id and deployment.strip():
            return deployment.strip()
    return model.id


def azure_base_url(model: ModelSpec, environ: Mapping[str, str]) -> str:
    resource = environ.get("AZURE_OPENAI_RESOURCE_NAME")
    base = (
        environ.get("AZURE_OPENAI_BASE_URL", "").strip()
        or (f"https://{resource}.openai.azure.com/openai/v1" if resource else "")
        or model.base_url
    )
    if not base:
        raise ProviderError(
            "Azure OpenAI base URL is required. Set AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME, "
            f"or give model '{model.id}' a baseUrl in models.json."
        )
    parts = urlsplit(base.strip().rstrip("/"))
    if not parts.scheme or not parts.netloc:
        raise ProviderError(
            f"Invalid Azure OpenAI base URL: {base} (set AZURE_OPENAI_BASE_URL to an https:// URL)"
        )
    # The SDK appends `/responses`; a bare Azure endpoint serves the v1 API under /openai/v1.
    if (parts.hostname or "").endswith(_AZURE_HOSTS) and parts.path.rstrip("/") in ("", "/openai"):
        parts = parts._replace(path="/openai/v1", query="")
    return urlunsplit(parts).rstrip("/")


def build_request(
    model: ModelSpec, context: LlmContext, options: StreamOptions, environ: Mapping[str, str] = os.environ
) -> dict[str, Any]:
    # pi's Azure body: as openai-responses' but without `store`, and with the session id as
    # cache key always.
    body: dict[str, Any] = {
        "model": deployment_name(model, environ),
        "input": responses_input(API, model, context, options),
        "stream": True,
    }
    if options.session_id:
        body["prompt_cache_key"] = options.session_id
    body["max_output_tokens"] = output_token_limit(model, options)
    body.update(sampling_fields(model, context, options))
    if "reasoning" not in body:
        off = responses_reasoning_when_off(model)
        if off is not None:
            body["reasoning"] = off
    return body


async def stream_azure_openai_responses(
    model: ModelSpec,
    context: LlmContext,
    options: StreamOptions,
    assembler: MessageAssembler,
    abort: AbortWatch,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    environ = os.environ
    api_key = options.api_key or environ.get("AZURE_OPENAI_API_KEY")
    if not api_key:
        raise ProviderError(
            f"No API key for Azure OpenAI (provider '{model.provider}'). Set AZURE_OPENAI_API_KEY "
            "or configure one in auth.json or models.json."
        )
    client = openai.AsyncAzureOpenAI(
        api_key=api_key,
        api_version=environ.get("AZURE_OPENAI_API_VERSION") or DEFAULT_API_VERSION,
        base_url=azure_base_url(model, environ),
        max_retries=options.sdk_retries,
        timeout=options.timeout_s,
        http_client=shared_http_client(openai.DefaultAsyncHttpxClient),
        default_headers=request_headers(model, options),
    )
    body = build_request(model, context, options, environ)
    payload = CONVERSATIONS.encode((API, options.session_id), body, "input")
    create = post_stream(client, "/responses", payload, Response, ResponseStreamEvent)
    try:
        async for event in relay_stream(create, abort, lambda raw: content_events(raw, assembler)):
            yield event
    except openai.APIStatusError as exc:
        raise ProviderError(with_setup_hint(describe_exception(exc), SETUP_HINT)) from exc
