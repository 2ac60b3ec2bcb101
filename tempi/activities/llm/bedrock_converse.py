"""Amazon Bedrock ConverseStream (`bedrock-converse-stream`) with botocore's credentials,
SigV4 signer and event-stream parser, over a pooled httpx client.

botocore is AWS's maintained Python SDK core; its bedrock-runtime client is not used because
it would serialise the body from its own model (validating and reordering what pi's shape
fixes here, and costing a client build per credential set), and because aiobotocore, its
async form, streams through its own aiohttp session, outside tempi's abort and pooling.
Here the body is tempi's, the request goes through one shared httpx pool, every wait runs
under the caller's AbortWatch, and closing the response returns the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
from botocore.eventstream import EventStreamBuffer, EventStreamMessage

from tempi.activities.llm.abort import AbortWatch
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.bedrock_access import SETUP_HINT, BedrockTarget, resolve_target, sign_headers
from tempi.activities.llm.bedrock_request import API, build_request
from tempi.activities.llm.contract import StreamOptions
from tempi.activities.llm.conversation_cache import CONVERSATIONS
from tempi.activities.llm.errors import IncompleteStreamError, ProviderError, is_overflow_text
from tempi.activities.llm.http_pool import shared_http_client
from tempi.agent.llm_context import LlmContext
from tempi.agent.messages import StopReason, TextContent, ThinkingContent
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}
# pi's wording for these exceptions (its retry and overflow checks read the words); others
# keep their AWS name.
_PREFIXES = {
    "InternalServerException": "Internal server error",
    "ModelStreamErrorException": "Model stream error",
    "ValidationException": "Validation error",
    "ThrottlingException": "Throttling error",
    "ServiceUnavailableException": "Service unavailable",
}
_AUTH_FAILURES = {
    "AccessDeniedException",
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "IncompleteSignatureException",
    "MissingAuthenticationTokenException",
    "ExpiredTokenException",
}
# What the AWS SDK retries on its own before pi sees a failure (standard retry mode).
_RETRIED_STATUSES = {429, 500, 502, 503, 504}
_THROTTLING = {"ThrottlingException", "TooManyRequestsException", "ModelNotReadyException"}
_RETRY_BASE_S, _THROTTLED_RETRY_BASE_S, _MAX_RETRY_DELAY_S = 0.1, 0.5, 20.0
_MAX_ERROR_BODY = 64 * 1024
EVENT_STREAM = "application/vnd.amazon.eventstream"


def _http_client() -> httpx.AsyncClient:
    return httpx.AsyncClient()


async def stream_bedrock_converse(
    model: ModelSpec,
    context: LlmContext,
    options: StreamOptions,
    assembler: MessageAssembler,
    abort: AbortWatch,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    body = build_request(model, context, options, os.environ)
    payload = CONVERSATIONS.encode((API, options.session_id), body, "messages")
    target = await asyncio.to_thread(resolve_target, model)
    response = await _send(target, payload, options, abort)
    try:
        async with contextlib.aclosing(abort.iterate(response.aiter_bytes())) as chunks:
            async for event in _content_events(_messages(chunks), assembler):
                yield event
    finally:
        await response.aclose()


async def _send(
    target: BedrockTarget, payload: bytes, options: StreamOptions, abort: AbortWatch
) -> httpx.Response:
    """The streaming response, after the quiet retries the AWS SDK would make."""
    client = shared_http_client(_http_client)
    timeout = httpx.Timeout(options.timeout_s)
    attempt = 0
    while True:
        headers = await asyncio.to_thread(sign_headers, target, payload)
        request = client.build_request("POST", target.url, content=payload, headers=headers, timeout=timeout)
        throttled = False
        try:
            response = await abort.run(client.send(request, stream=True))
        except httpx.TransportError:
            if attempt >= options.sdk_retries:
                raise
        else:
            if response.status_code == 200:
                content_type = response.headers.get("content-type", "")
                if content_type.startswith(EVENT_STREAM):
                    return response
                _, message = await _error_of(response, abort)
                raise ProviderError(
                    f"Amazon Bedrock answered with {content_type or 'no content type'}, not an event stream "
                    f"(is {target.url} a Bedrock runtime endpoint?): {message[:200]}"
                )
            error_type, message = await _error_of(response, abort)
            if attempt >= options.sdk_retries or not (
                response.status_code in _RETRIED_STATUSES or error_type in _THROTTLING
            ):
                raise ProviderError(_describe(response.status_code, error_type, message, target))
            throttled = response.status_code == 429 or error_type in _THROTTLING
        attempt += 1
        base = _THROTTLED_RETRY_BASE_S if throttled else _RETRY_BASE_S
        await abort.sleep(min(_MAX_RETRY_DELAY_S, random.random() * 2**attempt * base))


async def _error_of(response: httpx.Response, abort: AbortWatch) -> tuple[str | None, str]:
    """(exception name, message) of a failed response, which is then closed."""
    raw = b""
    try:
        async with contextlib.aclosing(abort.iterate(response.aiter_bytes())) as chunks:
            async for chunk in chunks:
                raw += chunk
                if len(raw) > _MAX_ERROR_BODY:
                    break
    finally:
        await response.aclose()
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    # The name is in x-amzn-ErrorType ("Name:namespace") or the body's __type/code
    # ("namespace#Name").
    raw_type = response.headers.get("x-amzn-errortype") or body.get("__type") or body.get("code")
    error_type = str(raw_type).split(":")[0].split("#")[-1] if raw_type else None
    message = body.get("message") or body.get("Message") or raw[:500].decode("utf-8", "replace").strip()
    return error_type, str(message) or "the provider gave no details"


def _describe(status: int, error_type: str | None, message: str, target: BedrockTarget) -> str:
    """What failed, in the shape errors.py classifies (the HTTP status first), and for a
    refusal what to set."""
    prefix = _PREFIXES.get(error_type or "", error_type)
    text = f"{status} {prefix}: {message}" if prefix else f"{status} {message}"
    if error_type in _AUTH_FAILURES or status in (401, 403):
        how = "a bearer token (AWS_BEARER_TOKEN_BEDROCK)" if isinstance(target.auth, str) else "SigV4"
        text += f" (Amazon Bedrock in {target.region} refused the request, authorised by {how}: {SETUP_HINT})"
    elif error_type in ("ValidationException", "ResourceNotFoundException") and not is_overflow_text(message):
        text += f" (Amazon Bedrock in {target.region}: check the model id, and AWS_REGION for where it is offered)"
    return text


async def _messages(chunks: AsyncIterator[bytes]) -> AsyncGenerator[EventStreamMessage, None]:
    """Event-stream frames, their CRCs checked by botocore's parser."""
    buffer = EventStreamBuffer()
    async for chunk in chunks:
        buffer.add_data(chunk)
        for message in buffer:
            yield message


def _exception(message: EventStreamMessage) -> ProviderError:
    headers = message.headers
    if headers.get(":message-type") == "error":
        return ProviderError(f"{headers.get(':error-code')}: {headers.get(':error-message')}")
    kind = str(headers.get(":exception-type") or "")
    name = kind[:1].upper() + kind[1:]  # throttlingException -> ThrottlingException
    try:
        text = json.loads(message.payload).get("message") or ""
    except (ValueError, AttributeError):
        text = message.payload.decode("utf-8", "replace")
    return ProviderError(f"{_PREFIXES.get(name, name)}: {text}")


async def _content_events(
    messages: AsyncIterator[EventStreamMessage], assembler: MessageAssembler
) -> AsyncGenerator[AssistantMessageEvent, None]:
    blocks: dict[int, int] = {}  # Bedrock's contentBlockIndex -> the assembler's
    stop_reason: str | None = None
    async for message in messages:
        if message.headers.get(":message-type") != "event":
            raise _exception(message)
        kind = message.headers.get(":event-type")
        event = json.loads(message.payload)
        if kind == "messageStart":
            if event.get("role") != "assistant":
                raise ProviderError(f"Amazon Bedrock started a message of role {event.get('role')!r}")
        elif kind == "contentBlockStart":
            tool = (event.get("start") or {}).get("toolUse")
            if tool is not None:
                started = assembler.begin_tool_call(tool.get("toolUseId") or "", tool.get("name") or "")
                blocks[event["contentBlockIndex"]] = started.content_index
                yield started
        elif kind == "contentBlockDelta":
            for delta_event in _delta(
                assembler, blocks, event["contentBlockIndex"], event.get("delta") or {}
            ):
                yield delta_event
        elif kind == "contentBlockStop":
            index = blocks.pop(event["contentBlockIndex"], None)
            if index is not None:
                yield _end_block(assembler, index)
        elif kind == "messageStop":
            stop_reason = event.get("stopReason")
        elif kind == "metadata":
            usage = event.get("usage")
            if isinstance(usage, dict):
                assembler.set_usage(
                    input=usage.get("inputTokens") or 0,
                    output=usage.get("outputTokens") or 0,
                    cache_read=usage.get("cacheReadInputTokens") or 0,
                    cache_write=usage.get("cacheWriteInputTokens") or 0,
                )
    for end in assembler.end_open_blocks():
        yield end
    if stop_reason is None:
        raise IncompleteStreamError("The response stream ended before the provider finished the message")
    assembler.set_stop_reason(_stop_reason(stop_reason))


def _delta(
    assembler: MessageAssembler, blocks: dict[int, int], position: int, delta: dict[str, Any]
) -> list[AssistantMessageEvent]:
    """Text and reasoning blocks have no start event: their first delta opens them."""
    events: list[AssistantMessageEvent] = []
    index = blocks.get(position)
    block = assembler.message.content[index] if index is not None else None
    if "text" in delta:
        if index is None:
            started = assembler.begin_text()
            index = blocks[position] = started.content_index
            events.append(started)
        elif not isinstance(block, TextContent):
            return events
        if delta["text"]:
            events.append(assembler.add_text(index, delta["text"]))
    elif "toolUse" in delta:
        piece = (delta["toolUse"] or {}).get("input") or ""
        if index is not None and piece and not isinstance(block, (TextContent, ThinkingContent)):
            events.append(assembler.add_tool_arguments(index, piece))
    elif "reasoningContent" in delta:
        reasoning = delta["reasoningContent"] or {}
        if index is None:
            started_thinking = assembler.begin_thinking()
            index = blocks[position] = started_thinking.content_index
            events.append(started_thinking)
        elif not isinstance(block, ThinkingContent):
            return events
        if reasoning.get("text"):
            events.append(assembler.add_thinking(index, reasoning["text"]))
        if reasoning.get("signature"):
            assembler.add_thinking_signature(index, reasoning["signature"])
    return events


def _end_block(assembler: MessageAssembler, index: int) -> AssistantMessageEvent:
    block = assembler.message.content[index]
    if isinstance(block, TextContent):
        return assembler.end_text(index)
    if isinstance(block, ThinkingContent):
        return assembler.end_thinking(index)
    return assembler.end_tool_call(index)


def _stop_reason(raw: str) -> StopReason:
    if raw in _STOP_REASONS:
        return _STOP_REASONS[raw]
    if raw in ("guardrail_intervened", "content_filtered"):
        raise ProviderError(f"Amazon Bedrock stopped the response (stop reason: {raw})")
    raise ProviderError(f"The provider ended the response with an unknown stop reason: {raw}")
