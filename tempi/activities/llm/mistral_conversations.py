"""Mistral (`mistral-conversations`): chat completions at `{baseUrl}/v1/chat/completions`.

Plain httpx rather than the `mistralai` SDK: the request is one JSON body that pi's own SDK
call reduces to (snake_case fields, `prefix: false` on assistant messages, `index: 0` on
replayed calls), which is simplest to send exactly as recorded; the SDK would add a
dependency and its import time to the worker for a stream of a handful of JSON fields, and
pi turns the SDK's retries off anyway, so it would only be a slower HTTP client here.

As pi: the session id goes as `x-affinity` (Mistral reuses its KV cache for requests that
carry the same one), tool-call ids are nine letters and digits (another provider's ids are
rehashed as pi does), and reasoning models get `prompt_mode: "reasoning"`, or
`reasoning_effort` for those that take an effort.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Container
from dataclasses import dataclass
from typing import Any

import httpx

from tempi.activities.llm.abort import AbortWatch, relay_stream
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.chat_messages import chat_tool_call, chat_user_content, compact_json
from tempi.activities.llm.contract import StreamOptions, output_token_limit, request_headers
from tempi.activities.llm.conversation_cache import CONVERSATIONS, ListConverter
from tempi.activities.llm.errors import (
    IncompleteStreamError,
    ProviderError,
    describe_http_failure,
    with_setup_hint,
)
from tempi.activities.llm.http_pool import shared_http_client
from tempi.activities.llm.pi_hash import short_hash
from tempi.activities.llm.thinking import effective_level
from tempi.activities.llm.transform import ConversationRepair, ToolIdFormat
from tempi.agent.llm_context import LlmContext, ToolSpec
from tempi.agent.messages import (
    AssistantMessage,
    ImageContent,
    LlmMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent

API = "mistral-conversations"
DEFAULT_BASE_URL = "https://api.mistral.ai"
TOOL_CALL_ID_LENGTH = 9
SETUP_HINT = "Mistral: check MISTRAL_API_KEY (or the key in auth.json / models.json) and the model id"
# Models that take `reasoning_effort`; pi's other reasoning models take `prompt_mode`.
_EFFORT_MODELS = frozenset({"mistral-small-2603", "mistral-small-latest", "mistral-medium-3.5"})
_STOP_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "model_length": "length",
    "tool_calls": "toolUse",
}


def mistral_tool_call_id(raw: str, attempt: int = 0) -> str:
    """pi's id for a tool call: its letters and digits when they are nine, else a hash."""
    alphanumeric = "".join(c for c in raw if c.isascii() and c.isalnum())
    if attempt == 0 and len(alphanumeric) == TOOL_CALL_ID_LENGTH:
        return alphanumeric
    seed = alphanumeric or raw
    if attempt:
        seed = f"{seed}:{attempt}"
    return "".join(c for c in short_hash(seed) if c.isalnum())[:TOOL_CALL_ID_LENGTH]


@dataclass(frozen=True)
class _MistralToolIds(ToolIdFormat):
    def normalize(self, raw: str, *, same_model: bool) -> str:
        return raw if same_model else mistral_tool_call_id(raw)

    def alternative(self, raw: str, normalized: str, taken: Container[str]) -> str:
        attempt = 1
        while (candidate := mistral_tool_call_id(raw, attempt)) in taken:
            attempt += 1
        return candidate


MISTRAL_TOOL_IDS = _MistralToolIds(max_length=TOOL_CALL_ID_LENGTH, keep_same_model_ids=True)


def build_request(model: ModelSpec, context: LlmContext, options: StreamOptions) -> dict[str, Any]:
    messages = CONVERSATIONS.convert(
        (API, options.session_id),
        context.messages,
        model,
        lambda: (ConversationRepair(model, MISTRAL_TOOL_IDS), MistralConverter(model)),
    )
    if context.system_prompt:
        messages = [{"role": "system", "content": context.system_prompt}, *messages]
    body: dict[str, Any] = {
        "model": model.id,
        "max_tokens": output_token_limit(model, options),
        "stream": True,
        "messages": messages,
    }
    if context.tools:
        body["tools"] = convert_tools(context.tools)
    if options.temperature is not None:
        body["temperature"] = options.temperature
    level = effective_level(model, options.thinking_level)
    if level is not None:
        if model.id in _EFFORT_MODELS:
            body["reasoning_effort"] = (model.thinking_level_map or {}).get(level) or "high"
        else:
            body["prompt_mode"] = "reasoning"
    return body


def convert_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "strict": False,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


class MistralConverter(ListConverter):
    """Repaired messages to Mistral chat messages, one at a time (see `conversation_cache`).
    Each tool result is a message of its own: nothing waits for the end of a run."""

    def __init__(self, model: ModelSpec) -> None:
        super().__init__()
        self.model = model

    def add(self, message: LlmMessage) -> None:
        if isinstance(message, UserMessage):
            self.converted.append({"role": "user", "content": chat_user_content(message, _image_part)})
        elif isinstance(message, AssistantMessage):
            converted = _assistant_message(message)
            if converted is not None:
                self.converted.append(converted)
        else:
            self.converted.append(_tool_message(message, self.model.supports_images))


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": f"data:{image.mime_type};base64,{image.data}"}


def _assistant_message(message: AssistantMessage) -> dict[str, Any] | None:
    content: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent) and block.text.strip():
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent) and block.thinking.strip():
            content.append({"type": "thinking", "thinking": [{"type": "text", "text": block.thinking}]})
    # `index: 0` is what pi's SDK fills in for a replayed call.
    calls = [{**chat_tool_call(call), "index": 0} for call in message.tool_calls()]
    if not content and not calls:
        return None
    converted: dict[str, Any] = {"role": "assistant"}
    if content:
        converted["content"] = content
    if calls:
        converted["tool_calls"] = calls
    converted["prefix"] = False
    return converted


def _tool_message(message: ToolResultMessage, supports_images: bool) -> dict[str, Any]:
    text = "\n".join(block.text for block in message.content if isinstance(block, TextContent)).strip()
    images = [block for block in message.content if isinstance(block, ImageContent)]
    prefix = "[tool error] " if message.is_error else ""
    if text:
        omitted = (
            "\n[tool image omitted: model does not support images]" if images and not supports_images else ""
        )
        text = f"{prefix}{text}{omitted}"
    elif images:
        text = prefix + (
            "(see attached image)" if supports_images else "(image omitted: model does not support images)"
        )
    else:
        text = f"{prefix}(no tool output)"
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if supports_images:
        content.extend(_image_part(image) for image in images)
    return {
        "role": "tool",
        "content": content,
        "tool_call_id": message.tool_call_id,
        "name": message.tool_name,
    }


async def stream_mistral_conversations(
    model: ModelSpec,
    context: LlmContext,
    options: StreamOptions,
    assembler: MessageAssembler,
    abort: AbortWatch,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    if not options.api_key:
        raise ProviderError(
            f"No API key for Mistral (provider '{model.provider}'). Set MISTRAL_API_KEY "
            "or configure one in auth.json or models.json."
        )
    headers = request_headers(model, options)
    if options.session_id and "x-affinity" not in headers:
        headers["x-affinity"] = options.session_id
    headers.update(
        {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "authorization": f"Bearer {options.api_key}",
        }
    )
    body = build_request(model, context, options)
    request = shared_http_client(httpx.AsyncClient).build_request(
        "POST",
        f"{(model.base_url or DEFAULT_BASE_URL).rstrip('/')}/v1/chat/completions",
        content=CONVERSATIONS.encode((API, options.session_id), body, "messages"),
        headers=headers,
        timeout=options.timeout_s,
    )
    async for event in relay_stream(_open(request), abort, lambda raw: _content_events(raw, assembler)):
        yield event


class _EventStream:
    """The JSON data of a streamed response's server-sent events."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._events = self._read()

    def __aiter__(self) -> _EventStream:
        return self

    def __anext__(self) -> Any:
        return self._events.__anext__()

    async def _read(self) -> AsyncGenerator[Any, None]:
        data: list[str] = []
        async for line in self._response.aiter_lines():
            if line.startswith("data:"):
                data.append(line[5:].strip())
            elif not line and data:
                payload, data = "\n".join(data), []
                if payload != "[DONE]":
                    yield json.loads(payload)

    async def close(self) -> None:
        await self._response.aclose()


async def _open(request: httpx.Request) -> _EventStream:
    response = await shared_http_client(httpx.AsyncClient).send(request, stream=True)
    if response.status_code < 400:
        return _EventStream(response)
    try:
        raw = await response.aread()
    finally:
        await response.aclose()
    try:
        body: object = json.loads(raw)
    except ValueError:
        body = raw.decode("utf-8", "replace")
    message = describe_http_failure(response.status_code, body, response.headers)
    raise ProviderError(with_setup_hint(message, SETUP_HINT))


async def _content_events(
    chunks: AsyncIterator[Any], assembler: MessageAssembler
) -> AsyncGenerator[AssistantMessageEvent, None]:
    current: int | None = None  # the open text or thinking block
    tool_blocks: dict[str, int] = {}
    finish_reason: str | None = None
    async for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        if not assembler.message.response_id:
            assembler.set_response_id(chunk.get("id"))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            # Mistral reports no cached tokens (pi counts none either).
            assembler.set_usage(
                input=usage.get("prompt_tokens") or 0, output=usage.get("completion_tokens") or 0
            )
        choices = chunk.get("choices") or []
        if not choices:
            continue
        choice = choices[0]
        finish_reason = choice.get("finish_reason") or finish_reason
        delta = choice.get("delta") or {}
        content = delta.get("content")
        for kind, text in _content_parts(content):
            if current is None or not isinstance(assembler.message.content[current], kind):
                if current is not None:
                    yield _end(assembler, current)
                start = assembler.begin_text() if kind is TextContent else assembler.begin_thinking()
                current = start.content_index
                yield start
            if kind is TextContent:
                yield assembler.add_text(current, text)
            else:
                yield assembler.add_thinking(current, text)
        for call in delta.get("tool_calls") or []:
            if current is not None:
                yield _end(assembler, current)
                current = None
            position = call.get("index") or 0
            call_id = call.get("id")
            if not call_id or call_id == "null":
                call_id = mistral_tool_call_id(f"toolcall:{position}")
            function = call.get("function") or {}
            key = f"{call_id}:{position}"
            if key not in tool_blocks:
                start_call = assembler.begin_tool_call(call_id, function.get("name") or "")
                tool_blocks[key] = start_call.content_index
                yield start_call
            arguments = function.get("arguments")
            piece = arguments if isinstance(arguments, str) else compact_json(arguments or {})
            if piece:
                yield assembler.add_tool_arguments(tool_blocks[key], piece)
    for end in assembler.end_open_blocks():
        yield end
    if finish_reason is None:
        raise IncompleteStreamError("The response stream ended before the provider finished the message")
    if finish_reason == "error":
        raise ProviderError("Mistral reported an error while generating the response")
    assembler.set_stop_reason(_STOP_REASONS.get(finish_reason, "stop"))


def _content_parts(content: Any) -> list[tuple[type[TextContent] | type[ThinkingContent], str]]:
    """(block kind, text) of a delta's content: a string, or Mistral's typed chunks."""
    if isinstance(content, str):
        return [(TextContent, content)] if content else []
    parts: list[tuple[type[TextContent] | type[ThinkingContent], str]] = []
    for item in content if isinstance(content, list) else []:
        if isinstance(item, str) and item:
            parts.append((TextContent, item))
        elif isinstance(item, dict) and item.get("type") == "text" and item.get("text"):
            parts.append((TextContent, str(item["text"])))
        elif isinstance(item, dict) and item.get("type") == "thinking":
            text = "".join(
                str(part.get("text") or "") for part in item.get("thinking") or [] if isinstance(part, dict)
            )
            if text:
                parts.append((ThinkingContent, text))
    return parts


def _end(assembler: MessageAssembler, index: int) -> AssistantMessageEvent:
    if isinstance(assembler.message.content[index], TextContent):
        return assembler.end_text(index)
    return assembler.end_thinking(index)
