"""Anthropic Messages API (`anthropic-messages`) over the official `anthropic` SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, cast

import anthropic

from tempi.activities.llm.abort import AbortWatch, relay_stream
from tempi.activities.llm.anthropic_oauth import (
    from_claude_code_name,
    is_oauth_token,
    oauth_body,
    oauth_headers,
)
from tempi.activities.llm.assembler import REDACTED_THINKING_TEXT, MessageAssembler
from tempi.activities.llm.cloudflare import (
    AI_GATEWAY,
    gateway_headers,
    with_cloudflare_base_url,
)
from tempi.activities.llm.contract import (
    StreamOptions,
    output_token_limit,
    request_headers,
    require_api_key,
)
from tempi.activities.llm.conversation_cache import CONVERSATIONS, ListConverter, append_tool_result
from tempi.activities.llm.copilot_headers import COPILOT_PROVIDER
from tempi.activities.llm.errors import IncompleteStreamError, ProviderError
from tempi.activities.llm.http_pool import shared_http_client
from tempi.activities.llm.thinking import anthropic_thinking
from tempi.activities.llm.transform import ANTHROPIC_TOOL_IDS, ConversationRepair
from tempi.agent.llm_context import LlmContext, ToolSpec
from tempi.agent.messages import (
    AssistantMessage,
    ImageContent,
    LlmMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserBlock,
    UserMessage,
)
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent, TextStart, ThinkingStart, ToolCallStart

API = "anthropic-messages"
EPHEMERAL = {"type": "ephemeral"}
# Lets Claude think between tool calls; pi sends it on every request.
BETA_HEADERS = {"anthropic-beta": "interleaved-thinking-2025-05-14"}
IMAGE_ONLY_RESULT_TEXT = "(see attached image)"


class ApiKeyAnthropic(anthropic.AsyncAnthropic):
    """The SDK client, sending the API key as `x-api-key`, as pi does for an API key.

    anthropic 2.x sends `api_key` as `Authorization: Bearer`; pi (Anthropic JS SDK) sends
    Bearer only for OAuth tokens (`sk-ant-oat…`, see OAuthAnthropic) and Copilot.
    """

    @property
    def _api_key_auth(self) -> dict[str, str]:
        return {} if self.api_key is None else {"x-api-key": self.api_key}


class OAuthAnthropic(anthropic.AsyncAnthropic):
    """The SDK client for a login: only `Authorization: Bearer`, never an ANTHROPIC_API_KEY the
    SDK would otherwise pick up from the worker's environment."""

    @property
    def _api_key_auth(self) -> dict[str, str]:
        return {}


class GatewayAnthropic(anthropic.AsyncAnthropic):
    """The Anthropic client without `x-api-key` or `Authorization`, for AI Gateway."""

    @property
    def auth_headers(self) -> dict[str, str]:
        return {}

    def _validate_headers(self, headers: Any, omitted: Any) -> None:
        return None


_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}


def build_request(model: ModelSpec, context: LlmContext, options: StreamOptions) -> dict[str, Any]:
    """The request body, in the shape pi sends."""
    thinking = anthropic_thinking(model, options.thinking_level, output_token_limit(model, options))
    body: dict[str, Any] = {
        "model": model.id,
        "messages": CONVERSATIONS.convert(
            (API, options.session_id),
            context.messages,
            model,
            lambda: (ConversationRepair(model, ANTHROPIC_TOOL_IDS), AnthropicConverter()),
        ),
        "max_tokens": thinking.max_tokens,
        "stream": True,
    }
    if context.system_prompt:
        body["system"] = [{"type": "text", "text": context.system_prompt, "cache_control": EPHEMERAL}]
    if options.temperature is not None and thinking.thinking is None:
        # Anthropic only accepts the default temperature while thinking.
        body["temperature"] = options.temperature
    if context.tools:
        body["tools"] = convert_tools(context.tools)
    if thinking.thinking is not None:
        body["thinking"] = thinking.thinking
    if thinking.output_config is not None:
        body["output_config"] = thinking.output_config
    return body


class AnthropicConverter(ListConverter):
    """Repaired messages to Anthropic messages, one at a time (see `conversation_cache`)."""

    def add(self, message: LlmMessage) -> None:
        converted = self.converted
        if isinstance(message, UserMessage):
            converted.append({"role": "user", "content": _user_content(message)})
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message)
            if blocks:
                converted.append({"role": "assistant", "content": blocks})
        else:
            append_tool_result(converted, _tool_result_block(message), _is_tool_results)

    def result(self) -> list[dict[str, Any]]:
        return _with_cache_breakpoint(self.converted)


def convert_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    converted: list[dict[str, Any]] = [
        {
            "name": tool.name,
            "description": tool.description,
            "eager_input_streaming": True,
            "input_schema": {
                "type": "object",
                "properties": tool.parameters.get("properties", {}),
                "required": tool.parameters.get("required", []),
            },
        }
        for tool in tools
    ]
    if converted:
        converted[-1]["cache_control"] = EPHEMERAL
    return converted


def _user_content(message: UserMessage) -> str | list[dict[str, Any]]:
    if isinstance(message.content, str):
        return message.content
    return [_user_block(block) for block in message.content]


def _user_block(block: UserBlock) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    return _image_block(block)


def _image_block(block: ImageContent) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.mime_type, "data": block.data}}


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            if block.redacted:
                if block.thinking_signature:
                    blocks.append({"type": "redacted_thinking", "data": block.thinking_signature})
            elif block.thinking_signature:
                blocks.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.thinking_signature}
                )
            elif block.thinking.strip():
                # Thinking cut off before its signature arrived cannot be replayed as thinking.
                blocks.append({"type": "text", "text": block.thinking})
        else:
            blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments})
    return blocks


def _tool_result_block(message: ToolResultMessage) -> dict[str, Any]:
    texts = [block.text for block in message.content if isinstance(block, TextContent)]
    images = [block for block in message.content if isinstance(block, ImageContent)]
    content: str | list[dict[str, Any]]
    if not images:
        content = "\n".join(texts)
    else:
        content = [{"type": "text", "text": text} for text in texts] or [
            {"type": "text", "text": IMAGE_ONLY_RESULT_TEXT}
        ]
        content.extend(_image_block(image) for image in images)
    return {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": content,
        "is_error": message.is_error,
    }


def _is_tool_results(content: object) -> bool:
    return isinstance(content, list) and bool(content) and content[0].get("type") == "tool_result"


def _with_cache_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cache the conversation up to its last user message, as pi does. The mark goes on a
    copy of that message: the others are shared with the next call."""
    if not messages or messages[-1]["role"] != "user":
        return list(messages)
    last = messages[-1]
    content = last["content"]
    if isinstance(content, str):
        marked = [{"type": "text", "text": content, "cache_control": EPHEMERAL}]
    elif content:
        marked = [*content[:-1], {**content[-1], "cache_control": EPHEMERAL}]
    else:
        marked = content
    return [*messages[:-1], {**last, "content": marked}]


async def stream_anthropic_messages(
    model: ModelSpec,
    context: LlmContext,
    options: StreamOptions,
    assembler: MessageAssembler,
    abort: AbortWatch,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    api_key = require_api_key(model, options)
    model = with_cloudflare_base_url(model)
    body = build_request(model, context, options)
    oauth = is_oauth_token(api_key) and model.provider != AI_GATEWAY
    settings: dict[str, Any] = dict(
        base_url=model.base_url or None,
        max_retries=options.sdk_retries,
        timeout=options.timeout_s,
        http_client=shared_http_client(anthropic.DefaultAsyncHttpxClient),
    )
    client: anthropic.AsyncAnthropic
    if oauth:
        body = oauth_body(body)
        headers = {**oauth_headers(BETA_HEADERS["anthropic-beta"]), **request_headers(model, options)}
        client = OAuthAnthropic(api_key=None, auth_token=api_key, default_headers=headers, **settings)
    elif model.provider == AI_GATEWAY:
        headers = {**BETA_HEADERS, **request_headers(model, options, gateway_headers(model, api_key))}
        client = GatewayAnthropic(api_key=None, auth_token=None, default_headers=headers, **settings)
    elif model.provider == COPILOT_PROVIDER:
        # Copilot takes its token as Bearer, as a login does, with its per-request headers.
        headers = {**BETA_HEADERS, **request_headers(model, options, context=context)}
        client = OAuthAnthropic(api_key=None, auth_token=api_key, default_headers=headers, **settings)
    else:
        headers = {**BETA_HEADERS, **request_headers(model, options)}
        client = ApiKeyAnthropic(api_key=api_key, default_headers=headers, **settings)

    def tool_name(name: str) -> str:
        return from_claude_code_name(name, context.tools) if oauth else name

    create = cast(Any, client.messages).create(**body)
    async for event in relay_stream(create, abort, lambda raw: _content_events(raw, assembler, tool_name)):
        yield event


async def _content_events(
    events: AsyncIterator[Any], assembler: MessageAssembler, tool_name: Callable[[str], str]
) -> AsyncGenerator[AssistantMessageEvent, None]:
    # Anthropic numbers blocks itself; server-side tool blocks it may add are not ours to show.
    blocks: dict[int, int] = {}
    initial_input: dict[int, dict[str, Any]] = {}
    stop_reason: str | None = None
    finished = False
    async for event in events:
        kind = event.type
        if kind == "message_start":
            assembler.set_response_id(event.message.id)
            _record_usage(assembler, event.message.usage)
        elif kind == "content_block_start":
            started = _start_block(assembler, event.content_block, tool_name)
            if started is not None:
                blocks[event.index] = started.content_index
                if event.content_block.type == "tool_use" and event.content_block.input:
                    initial_input[started.content_index] = dict(event.content_block.input)
                yield started
        elif kind == "content_block_delta" and event.index in blocks:
            delta = _apply_delta(assembler, blocks[event.index], event.delta)
            if delta is not None:
                yield delta
        elif kind == "content_block_stop" and event.index in blocks:
            yield _end_block(assembler, blocks.pop(event.index), initial_input)
        elif kind == "message_delta":
            if event.delta.stop_reason:
                stop_reason = event.delta.stop_reason
            _record_usage(assembler, event.usage)
        elif kind == "message_stop":
            finished = True
    for event in assembler.end_open_blocks():
        yield event
    if not finished:
        raise IncompleteStreamError("The response stream ended before the provider finished the message")
    assembler.set_stop_reason(_stop_reason(stop_reason))


def _start_block(
    assembler: MessageAssembler, block: Any, tool_name: Callable[[str], str]
) -> TextStart | ThinkingStart | ToolCallStart | None:
    if block.type == "text":
        return assembler.begin_text()
    if block.type == "thinking":
        return assembler.begin_thinking(signature=block.signature or None)
    if block.type == "redacted_thinking":
        return assembler.begin_thinking(text=REDACTED_THINKING_TEXT, signature=block.data, redacted=True)
    if block.type == "tool_use":
        return assembler.begin_tool_call(block.id, tool_name(block.name))
    return None


def _apply_delta(assembler: MessageAssembler, index: int, delta: Any) -> AssistantMessageEvent | None:
    if delta.type == "text_delta":
        return assembler.add_text(index, delta.text)
    if delta.type == "thinking_delta":
        return assembler.add_thinking(index, delta.thinking)
    if delta.type == "signature_delta":
        assembler.add_thinking_signature(index, delta.signature)
        return None
    if delta.type == "input_json_delta" and delta.partial_json:
        return assembler.add_tool_arguments(index, delta.partial_json)
    return None


def _end_block(
    assembler: MessageAssembler, index: int, initial_input: dict[int, dict[str, Any]]
) -> AssistantMessageEvent:
    block = assembler.message.content[index]
    if isinstance(block, TextContent):
        return assembler.end_text(index)
    if isinstance(block, ThinkingContent):
        return assembler.end_thinking(index)
    if not assembler.tool_arguments_json(index) and index in initial_input:
        return assembler.end_tool_call(index, arguments_json=json.dumps(initial_input[index]))
    return assembler.end_tool_call(index)


def _record_usage(assembler: MessageAssembler, usage: Any) -> None:
    # message_delta carries cumulative counts; a proxy may leave some out, keep what we had then.
    current = assembler.message.usage
    assembler.set_usage(
        input=_count(usage, "input_tokens", current.input),
        output=_count(usage, "output_tokens", current.output),
        cache_read=_count(usage, "cache_read_input_tokens", current.cache_read),
        cache_write=_count(usage, "cache_creation_input_tokens", current.cache_write),
    )


def _count(usage: Any, field: str, fallback: int) -> int:
    value = getattr(usage, field, None)
    return value if isinstance(value, int) else fallback


def _stop_reason(raw: str | None) -> StopReason:
    if raw is None:
        return "stop"
    if raw in _STOP_REASONS:
        return _STOP_REASONS[raw]
    if raw == "refusal":
        raise ProviderError("The model declined to respond (stop reason: refusal)")
    raise ProviderError(f"The provider ended the response with an unknown stop reason: {raw}")
