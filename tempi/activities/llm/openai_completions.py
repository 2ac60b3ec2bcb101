"""OpenAI Chat Completions API (`openai-completions`) over the official `openai` SDK.

Also the API most OpenAI-compatible servers speak (vLLM, llama.cpp, Ollama, OpenRouter,
...); `model.compat` switches off what a given server does not support.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from tempi.activities.llm.abort import AbortWatch, relay_stream
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.chat_messages import chat_tool_call, chat_user_content
from tempi.activities.llm.cloudflare import (
    AI_GATEWAY,
    gateway_headers,
    with_cloudflare_base_url,
)
from tempi.activities.llm.cloudflare_openai import GatewayOpenAI
from tempi.activities.llm.contract import (
    StreamOptions,
    compat_flag,
    output_token_limit,
    request_headers,
    require_api_key,
)
from tempi.activities.llm.conversation_cache import CONVERSATIONS, ListConverter
from tempi.activities.llm.errors import IncompleteStreamError, ProviderError
from tempi.activities.llm.http_pool import shared_http_client
from tempi.activities.llm.openai_post import post_stream
from tempi.activities.llm.thinking import openai_reasoning_effort
from tempi.activities.llm.transform import OPENAI_CHAT_TOOL_IDS, ConversationRepair
from tempi.agent.llm_context import LlmContext, ToolSpec
from tempi.agent.messages import (
    AssistantMessage,
    ImageContent,
    LlmMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
)
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent

API = "openai-completions"
IMAGE_ONLY_RESULT_TEXT = "(see attached image)"
TOOL_IMAGES_TEXT = "Attached image(s) from tool result:"
# Fields OpenAI-compatible servers stream reasoning in; the name is kept as the thinking
# signature so the same server gets its reasoning back in the field it used.
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "end_turn": "stop",
    "length": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
}


def build_request(model: ModelSpec, context: LlmContext, options: StreamOptions) -> dict[str, Any]:
    """The request body, in the shape pi sends."""
    messages: list[dict[str, Any]] = []
    if context.system_prompt:
        developer = model.reasoning and compat_flag(model, "supportsDeveloperRole", True)
        messages.append({"role": "developer" if developer else "system", "content": context.system_prompt})
    messages.extend(
        CONVERSATIONS.convert(
            (API, options.session_id),
            context.messages,
            model,
            lambda: (ConversationRepair(model, OPENAI_CHAT_TOOL_IDS), ChatConverter(model)),
        )
    )
    body: dict[str, Any] = {
        "model": model.id,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if compat_flag(model, "supportsStore", True):
        body["store"] = False
    max_tokens_field = (model.compat or {}).get("maxTokensField", "max_completion_tokens")
    body[str(max_tokens_field)] = output_token_limit(model, options)
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if context.tools:
        body["tools"] = convert_tools(context.tools)
    effort = openai_reasoning_effort(model, options.thinking_level)
    if effort is not None and compat_flag(model, "supportsReasoningEffort", True):
        body["reasoning_effort"] = effort
    if options.session_id and _is_openai(model):
        body["prompt_cache_key"] = options.session_id
    return body


class ChatConverter(ListConverter):
    """Repaired messages to chat messages, one at a time (see `conversation_cache`)."""

    def __init__(self, model: ModelSpec) -> None:
        super().__init__()
        self.model = model
        # Images from a run of tool results follow the run: a user message between two tool
        # messages would separate results from their call.
        self.pending_images: list[ImageContent] = []

    def copy(self) -> ChatConverter:
        twin = super().copy()
        twin.pending_images = list(self.pending_images)
        return twin

    def close_turn(self) -> None:
        if self.pending_images:
            self.converted.append(_tool_images_message(self.pending_images))
            self.pending_images = []

    def add(self, message: LlmMessage) -> None:
        if isinstance(message, UserMessage):
            self.close_turn()
            self.converted.append({"role": "user", "content": chat_user_content(message, _image_part)})
        elif isinstance(message, AssistantMessage):
            self.close_turn()
            assistant = _assistant_message(message)
            if assistant is not None:
                self.converted.append(assistant)
        else:
            texts = [block.text for block in message.content if isinstance(block, TextContent)]
            images = [block for block in message.content if isinstance(block, ImageContent)]
            text = "\n".join(texts) if texts else (IMAGE_ONLY_RESULT_TEXT if images else "")
            self.converted.append({"role": "tool", "content": text, "tool_call_id": message.tool_call_id})
            if self.model.supports_images:
                self.pending_images.extend(images)

    def result(self) -> list[dict[str, Any]]:
        if self.pending_images:
            return [*self.converted, _tool_images_message(self.pending_images)]
        return list(self.converted)


def _tool_images_message(images: list[ImageContent]) -> dict[str, Any]:
    parts = [{"type": "text", "text": TOOL_IMAGES_TEXT}] + [_image_part(i) for i in images]
    return {"role": "user", "content": parts}


def convert_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "strict": False,
            },
        }
        for tool in tools
    ]


def _is_openai(model: ModelSpec) -> bool:
    return not model.base_url or "api.openai.com" in model.base_url


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"}}


def _assistant_message(message: AssistantMessage) -> dict[str, Any] | None:
    text = "".join(block.text for block in message.content if isinstance(block, TextContent))
    converted: dict[str, Any] = {"role": "assistant", "content": text or None}
    thinking = [block for block in message.content if isinstance(block, ThinkingContent)]
    field = thinking[0].thinking_signature if thinking else None
    if field in REASONING_FIELDS:
        converted[str(field)] = "\n".join(block.thinking for block in thinking)
    calls = message.tool_calls()
    if calls:
        converted["tool_calls"] = [chat_tool_call(call) for call in calls]
    if not text and not calls:
        return None
    return converted


async def stream_openai_completions(
    model: ModelSpec,
    context: LlmContext,
    options: StreamOptions,
    assembler: MessageAssembler,
    abort: AbortWatch,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    api_key = require_api_key(model, options)
    body = build_request(model, context, options)
    model = with_cloudflare_base_url(model)
    client_type = GatewayOpenAI if model.provider == AI_GATEWAY else openai.AsyncOpenAI
    client = client_type(
        api_key=api_key,
        base_url=model.base_url or None,
        max_retries=options.sdk_retries,
        timeout=options.timeout_s,
        http_client=shared_http_client(openai.DefaultAsyncHttpxClient),
        default_headers=request_headers(model, options, gateway_headers(model, api_key), context),
    )
    payload = CONVERSATIONS.encode((API, options.session_id), body, "messages")
    # Chunks come as the SDK's parsed JSON (`object`), not as its models: building a pydantic
    # object per chunk, field by field, was a tenth of a busy worker's time, and reading the
    # few fields tempi needs through attribute views still cost 8 µs a chunk (issue 13).
    create = post_stream(client, "/chat/completions", payload, ChatCompletion, object)
    async for event in relay_stream(create, abort, lambda raw: _content_events(raw, assembler)):
        yield event


async def _content_events(
    chunks: AsyncIterator[Any], assembler: MessageAssembler
) -> AsyncGenerator[AssistantMessageEvent, None]:
    """Events from chat-completion chunks as parsed JSON. Compatible servers send null for
    fields they lack as often as they leave them out; both read the same here."""
    current: int | None = None
    tool_blocks: dict[int, int] = {}
    finish_reason: str | None = None

    async for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        assembler.set_response_id(chunk.get("id"))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            _record_usage(assembler, usage)
        choices = chunk.get("choices")
        if not choices:
            continue
        choice = choices[0]
        delta = choice.get("delta")
        if isinstance(delta, dict):
            for field in REASONING_FIELDS:
                reasoning = delta.get(field)
                if isinstance(reasoning, str) and reasoning:
                    if current is None or not _is_open_kind(assembler, current, ThinkingContent):
                        for event in _end(assembler, current):
                            yield event
                        thinking = assembler.begin_thinking(signature=field)
                        current = thinking.content_index
                        yield thinking
                    yield assembler.add_thinking(current, reasoning)
            content = delta.get("content")
            if content:
                if current is None or not _is_open_kind(assembler, current, TextContent):
                    for event in _end(assembler, current):
                        yield event
                    text = assembler.begin_text()
                    current = text.content_index
                    yield text
                yield assembler.add_text(current, content)
            for call in delta.get("tool_calls") or []:
                position = _tool_position(call, tool_blocks, assembler)
                function = call.get("function") or {}
                call_id, name = call.get("id"), function.get("name")
                if position not in tool_blocks:
                    for event in _end(assembler, current):
                        yield event
                    tool = assembler.begin_tool_call(call_id or "", name or "")
                    tool_blocks[position] = current = tool.content_index
                    yield tool
                index = tool_blocks[position]
                assembler.rename_tool_call(index, call_id=call_id, name=name)
                if function.get("arguments"):
                    yield assembler.add_tool_arguments(index, function["arguments"])
        if choice.get("finish_reason"):
            finish_reason = choice["finish_reason"]
    for event in assembler.end_open_blocks():
        yield event
    if finish_reason is None:
        raise IncompleteStreamError("The response stream ended before the provider finished the message")
    assembler.set_stop_reason(_stop_reason(finish_reason, assembler.has_tool_calls()))


def _tool_position(call: dict[str, Any], tool_blocks: dict[int, int], assembler: MessageAssembler) -> int:
    """Which streamed tool call a delta belongs to; some compatible servers leave out `index`."""
    position, call_id = call.get("index"), call.get("id")
    if isinstance(position, int):
        return position
    for known, index in tool_blocks.items():
        block = assembler.message.content[index]
        if call_id and isinstance(block, ToolCall) and block.id == call_id:
            return known
    if call_id or not tool_blocks:
        return len(tool_blocks)
    return max(tool_blocks)


def _is_open_kind(assembler: MessageAssembler, index: int, kind: type) -> bool:
    return assembler.is_open(index) and isinstance(assembler.message.content[index], kind)


def _end(assembler: MessageAssembler, index: int | None) -> list[AssistantMessageEvent]:
    if index is None or not assembler.is_open(index):
        return []
    block = assembler.message.content[index]
    if isinstance(block, TextContent):
        return [assembler.end_text(index)]
    if isinstance(block, ThinkingContent):
        return [assembler.end_thinking(index)]
    return [assembler.end_tool_call(index)]


def _record_usage(assembler: MessageAssembler, usage: dict[str, Any]) -> None:
    # prompt_tokens includes cached tokens; cache writes are reported by some proxies (OpenRouter).
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or 0
    written = details.get("cache_write_tokens") or 0
    prompt = usage.get("prompt_tokens") or 0
    assembler.set_usage(
        input=prompt - cached - written,
        output=usage.get("completion_tokens") or 0,
        cache_read=cached,
        cache_write=written,
    )


def _stop_reason(finish_reason: str, has_tool_calls: bool) -> StopReason:
    if finish_reason == "content_filter":
        raise ProviderError("The provider's content filter stopped the response")
    reason = _FINISH_REASONS.get(finish_reason)
    if reason is None:
        raise ProviderError(f"The provider ended the response with an unknown finish reason: {finish_reason}")
    # Some compatible servers report "stop" even when the turn ends in tool calls.
    if reason == "stop" and has_tool_calls:
        return "toolUse"
    return reason
