"""OpenAI Codex (`openai-codex-responses`): the Responses API of a ChatGPT Plus/Pro login.

`POST {baseUrl}/codex/responses` on the ChatGPT backend (https://chatgpt.com/backend-api), with
the login's access token (a JWT, given as the API key) as Bearer and the account id read from
the token itself. The body is Responses' with the system prompt as `instructions`, nothing
stored, and encrypted reasoning asked for so it can be replayed. Sent over the `openai` SDK's
client with pi's header set (the SDK's own `X-Stainless-*` headers removed); pi's WebSocket
transport is not offered, SSE is what pi falls back to and what it uses on Node 20.
"""

from __future__ import annotations

import base64
import binascii
import json
import platform
import sys
import time
from collections.abc import AsyncGenerator
from typing import Any

import openai
from openai.types.responses import Response, ResponseStreamEvent

from tempi.activities.llm.abort import AbortWatch, relay_stream
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.contract import StreamOptions, request_headers
from tempi.activities.llm.conversation_cache import CONVERSATIONS
from tempi.activities.llm.errors import ProviderError, describe_exception, with_setup_hint
from tempi.activities.llm.http_pool import shared_http_client
from tempi.activities.llm.openai_post import post_stream
from tempi.activities.llm.openai_responses import content_events, convert_tools, responses_input
from tempi.activities.llm.thinking import responses_reasoning
from tempi.agent.llm_context import LlmContext
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent

API = "openai-codex-responses"
DEFAULT_BASE_URL = "https://chatgpt.com/backend-api"
DEFAULT_INSTRUCTIONS = "You are a helpful assistant."
JWT_CLAIM = "https://api.openai.com/auth"
# pi retries a failed Codex request three times itself, whatever the settings say.
CODEX_RETRIES = 3
# The backend records which client called; it takes any name (pi sends "pi", the Codex CLI
# "codex_cli_rs"), so tempi names itself.
ORIGINATOR = "tempi"
LOGIN_HINT = (
    "OpenAI Codex: log in again with /login (ChatGPT Plus/Pro), or fix the openai-codex entry of auth.json"
)
_USAGE_LIMIT_CODES = ("usage_limit_reached", "usage_not_included")


def codex_url(model: ModelSpec) -> str:
    base = (model.base_url.strip() or DEFAULT_BASE_URL).rstrip("/")
    if base.endswith("/codex/responses"):
        return base
    if base.endswith("/codex"):
        return f"{base}/responses"
    return f"{base}/codex/responses"


def account_id(token: str) -> str:
    """The ChatGPT account the access token belongs to (its `chatgpt_account_id` claim)."""
    parts = token.split(".")
    claims: Any = None
    if len(parts) == 3:
        try:
            claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        except (binascii.Error, ValueError):
            claims = None
    auth = claims.get(JWT_CLAIM) if isinstance(claims, dict) else None
    account = auth.get("chatgpt_account_id") if isinstance(auth, dict) else None
    if not isinstance(account, str) or not account:
        raise ProviderError(
            "The OpenAI Codex key is not a ChatGPT login token (no account id in it). Log in with /login "
            "(ChatGPT Plus/Pro), or check the openai-codex entry of auth.json."
        )
    return account


def build_request(model: ModelSpec, context: LlmContext, options: StreamOptions) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model.id,
        "store": False,
        "stream": True,
        "instructions": context.system_prompt or DEFAULT_INSTRUCTIONS,
        "input": responses_input(API, model, context, options, system_item=False),
        "text": {"verbosity": "low"},
        # With store=false, reasoning can only be replayed from its encrypted form.
        "include": ["reasoning.encrypted_content"],
    }
    if options.session_id:
        body["prompt_cache_key"] = options.session_id
    body["tool_choice"] = "auto"
    body["parallel_tool_calls"] = True
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if context.tools:
        body["tools"] = convert_tools(context.tools, strict=None)
    reasoning = responses_reasoning(model, options.thinking_level)
    if reasoning is not None:
        body["reasoning"] = reasoning
    return body


def codex_headers(token: str, options: StreamOptions) -> dict[str, str]:
    headers = {
        "chatgpt-account-id": account_id(token),
        "originator": ORIGINATOR,
        "User-Agent": f"tempi ({sys.platform} {platform.release()}; {platform.machine()})",
        "OpenAI-Beta": "responses=experimental",
        "accept": "text/event-stream",
    }
    if options.session_id:
        headers["session_id"] = options.session_id
        headers["x-client-request-id"] = options.session_id
    return headers


async def stream_openai_codex_responses(
    model: ModelSpec,
    context: LlmContext,
    options: StreamOptions,
    assembler: MessageAssembler,
    abort: AbortWatch,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    token = options.api_key
    if not token:
        raise ProviderError(f"No ChatGPT login for provider '{model.provider}'. {LOGIN_HINT}.")
    client = openai.AsyncOpenAI(
        api_key=token,
        base_url=DEFAULT_BASE_URL,  # unused: the request names its whole URL
        max_retries=CODEX_RETRIES,
        timeout=options.timeout_s,
        http_client=shared_http_client(openai.DefaultAsyncHttpxClient),
    )
    # As pi: the model's and the caller's headers, then Codex's own over them.
    headers: dict[str, str | openai.Omit] = {
        **request_headers(model, options),
        **codex_headers(token, options),
    }
    for name in (*client.default_headers, "X-Stainless-Retry-Count", "X-Stainless-Read-Timeout"):
        if name.lower().startswith("x-stainless"):
            headers[name] = openai.Omit()
    body = build_request(model, context, options)
    payload = CONVERSATIONS.encode((API, options.session_id), body, "input")
    create = post_stream(client, codex_url(model), payload, Response, ResponseStreamEvent, headers)
    try:
        async for event in relay_stream(create, abort, lambda raw: content_events(raw, assembler)):
            yield event
    except openai.APIStatusError as exc:
        raise ProviderError(_describe_failure(exc)) from exc


def _describe_failure(exc: openai.APIStatusError) -> str:
    error = exc.body if isinstance(exc.body, dict) else {}
    code = str(error.get("code") or error.get("type") or "")
    if exc.status_code == 429 and code in _USAGE_LIMIT_CODES:
        # pi's wording; the limit lasts for hours, so this is no failure to retry.
        plan = error.get("plan_type")
        resets = error.get("resets_at")
        text = (
            "You have hit your ChatGPT usage limit" + (f" ({str(plan).lower()} plan)" if plan else "") + "."
        )
        if isinstance(resets, (int, float)):
            text += f" It resets in about {max(0, round((resets - time.time()) / 60))} min."
        return text
    return with_setup_hint(describe_exception(exc), LOGIN_HINT)
