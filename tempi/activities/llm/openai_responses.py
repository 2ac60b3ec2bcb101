"""OpenAI Responses API (`openai-responses`) over the official `openai` SDK."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import openai
from openai.types.responses import Response, ResponseStreamEvent

from tempi.activities.llm.abort import AbortWatch, relay_stream
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.chat_messages import compact_json
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
from tempi.activities.llm.thinking import responses_reasoning
from tempi.activities.llm.transform import (
    OPENAI_RESPONSES_TOOL_IDS,
    ConversationRepair,
    is_same_model,
)
from tempi.agent.llm_context import LlmContext, ToolSpec
from tempi.agent.messages import (
    AssistantMessage,
    ImageContent,
    LlmMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    UserMessage,
)
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent, TextStart, ThinkingStart, ToolCallStart

API = "openai-responses"
IMAGE_ONLY_RESULT_TEXT = "(see attached image)"
TOOL_IMAGES_TEXT = "Attached image(s) from tool result:"
MAX_ITEM_ID_LENGTH = 64


def responses_input(
    api: str, model: ModelSpec, context: LlmContext, options: StreamOptions, *, system_item: bool = True
) -> list[dict[str, Any]]:
    """The `input` items of a Responses request (for every API that speaks the format), the
    system prompt first unless the API takes it as `instructions`."""
    items: list[dict[str, Any]] = []
    if system_item and context.system_prompt:
        items.append({"role": "developer" if model.reasoning else "system", "content": context.system_prompt})
    items.extend(
        CONVERSATIONS.convert(
            (api, options.session_id),
            context.messages,
            model,
            lambda: (ConversationRepair(model, OPENAI_RESPONSES_TOOL_IDS), ResponsesConverter(model)),
        )
    )
    return items


def build_request(model: ModelSpec, context: LlmContext, options: StreamOptions) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model.id,
        "input": responses_input(API, model, context, options),
        "stream": True,
        "store": False,
        "max_output_tokens": output_token_limit(model, options),
        **sampling_fields(model, context, options),
    }
    if options.session_id:
        body["prompt_cache_key"] = options.session_id
    return body


def sampling_fields(model: ModelSpec, context: LlmContext, options: StreamOptions) -> dict[str, Any]:
    """`temperature`, `tools` and `reasoning` of a store=false Responses body (OpenAI's, Azure's)."""
    fields: dict[str, Any] = {}
    if options.temperature is not None:
        fields["temperature"] = options.temperature
    if context.tools:
        fields["tools"] = convert_tools(context.tools)
    reasoning = responses_reasoning(model, options.thinking_level)
    if reasoning is not None:
        fields["reasoning"] = reasoning
        # With store=false, reasoning can only be replayed from its encrypted form.
        fields["include"] = ["reasoning.encrypted_content"]
    return fields


def session_headers(model: ModelSpec, options: StreamOptions) -> dict[str, str]:
    """pi's cache-affinity headers: the session id as `session_id` (unless compat
    `sendSessionIdHeader` is false) and as `x-client-request-id`. As in pi, they override
    the model's headers and per-call headers override them."""
    if not options.session_id:
        return {}
    headers = {"x-client-request-id": options.session_id}
    if compat_flag(model, "sendSessionIdHeader", True):
        headers = {"session_id": options.session_id, **headers}
    return headers


class ResponsesConverter(ListConverter):
    """Repaired messages to input items, one at a time (see `conversation_cache`)."""

    def __init__(self, model: ModelSpec) -> None:
        super().__init__()
        self.model = model
        self.pending_images: list[ImageContent] = []
        self.position = 0  # of the next message in the repaired conversation

    def copy(self) -> ResponsesConverter:
        twin = super().copy()
        twin.pending_images = list(self.pending_images)
        return twin

    def close_turn(self) -> None:
        if self.pending_images:
            self.converted.append(_tool_images_item(self.pending_images))
            self.pending_images = []

    def add(self, message: LlmMessage) -> None:
        position = self.position
        self.position += 1
        if isinstance(message, UserMessage):
            self.close_turn()
            self.converted.append({"role": "user", "content": _user_parts(message)})
        elif isinstance(message, AssistantMessage):
            self.close_turn()
            self.converted.extend(_assistant_items(message, self.model, position))
        else:
            texts = [block.text for block in message.content if isinstance(block, TextContent)]
            images = [block for block in message.content if isinstance(block, ImageContent)]
            output = "\n".join(texts) if texts else (IMAGE_ONLY_RESULT_TEXT if images else "")
            self.converted.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id.split("|", 1)[0],
                    "output": output,
                }
            )
            if self.model.supports_images:
                self.pending_images.extend(images)

    def result(self) -> list[dict[str, Any]]:
        if self.pending_images:
            return [*self.converted, _tool_images_item(self.pending_images)]
        return list(self.converted)


def _tool_images_item(images: list[ImageContent]) -> dict[str, Any]:
    parts = [{"type": "input_text", "text": TOOL_IMAGES_TEXT}] + [_image_part(i) for i in images]
    return {"role": "user", "content": parts}


def convert_tools(tools: list[ToolSpec], strict: bool | None = False) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "strict": strict,
        }
        for tool in tools
    ]


def _user_parts(message: UserMessage) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"type": "input_text", "text": message.content}]
    return [
        {"type": "input_text", "text": block.text} if isinstance(block, TextContent) else _image_part(block)
        for block in message.content
    ]


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {
        "type": "input_image",
        "detail": "auto",
        "image_url": f"data:{image.mime_type};base64,{image.data}",
    }


def _assistant_items(message: AssistantMessage, model: ModelSpec, position: int) -> list[dict[str, Any]]:
    same_model = is_same_model(message, model)
    items: list[dict[str, Any]] = []
    # A function call whose reasoning item is not replayed must not carry its item id:
    # OpenAI checks that such ids come with the reasoning that produced them.
    reasoning_missing = False
    for block in message.content:
        if isinstance(block, ThinkingContent):
            reasoning = _reasoning_item(block) if same_model else None
            if reasoning is None:
                reasoning_missing = True
            else:
                items.append(reasoning)
        elif isinstance(block, TextContent):
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": block.text, "annotations": []}],
                    "status": "completed",
                    "id": _message_id(block.text_signature, position),
                }
            )
        else:
            call_id, _, item_id = block.id.partition("|")
            call: dict[str, Any] = {
                "type": "function_call",
                "call_id": call_id,
                "name": block.name,
                "arguments": compact_json(block.arguments),
            }
            if item_id and same_model and not reasoning_missing:
                call["id"] = item_id
            items.append(call)
    return items


def _reasoning_item(block: ThinkingContent) -> dict[str, Any] | None:
    if not block.thinking_signature:
        return None
    try:
        item = json.loads(block.thinking_signature)
    except ValueError:
        return None
    return item if isinstance(item, dict) and item.get("type") == "reasoning" else None


def _message_id(signature: str | None, position: int) -> str:
    """The output item id a text block came from (pi stores it plain or as `{"v":1,"id":...}`)."""
    item_id = signature
    if signature and signature.startswith("{"):
        try:
            parsed = json.loads(signature)
        except ValueError:
            parsed = None
        item_id = parsed.get("id") if isinstance(parsed, dict) else None
    if not item_id:
        return f"msg_{position}"
    if len(item_id) > MAX_ITEM_ID_LENGTH:
        return "msg_" + hashlib.sha256(item_id.encode()).hexdigest()[:32]
    return str(item_id)


async def stream_openai_responses(
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
    provider_headers = {**session_headers(model, options), **gateway_headers(model, api_key)}
    client = client_type(
        api_key=api_key,
        base_url=model.base_url or None,
        max_retries=options.sdk_retries,
        timeout=options.timeout_s,
        http_client=shared_http_client(openai.DefaultAsyncHttpxClient),
        default_headers=request_headers(model, options, provider_headers, context),
    )
    payload = CONVERSATIONS.encode((API, options.session_id), body, "input")
    create = post_stream(client, "/responses", payload, Response, ResponseStreamEvent)
    async for event in relay_stream(create, abort, lambda raw: content_events(raw, assembler)):
        yield event


async def content_events(
    events: AsyncIterator[Any], assembler: MessageAssembler
) -> AsyncGenerator[AssistantMessageEvent, None]:
    """Responses stream events (the SDK's typed events) as content events on `assembler`."""
    # Output items are numbered by the API (`output_index`); map them to content blocks.
    blocks: dict[int, int] = {}
    finished = False
    async for event in events:
        kind = event.type
        if kind == "response.created":
            assembler.set_response_id(event.response.id)
        elif kind == "response.output_item.added":
            started = _start_item(assembler, event.item)
            if started is not None:
                blocks[event.output_index] = started.content_index
                yield started
        elif kind == "response.reasoning_summary_part.added" and event.output_index in blocks:
            index = blocks[event.output_index]
            if _block_text(assembler, index):
                yield assembler.add_thinking(index, "\n\n")
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if event.output_index in blocks and event.delta:
                yield assembler.add_thinking(blocks[event.output_index], event.delta)
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            if event.output_index in blocks and event.delta:
                yield assembler.add_text(blocks[event.output_index], event.delta)
        elif kind == "response.function_call_arguments.delta":
            if event.output_index in blocks and event.delta:
                yield assembler.add_tool_arguments(blocks[event.output_index], event.delta)
        elif kind == "response.output_item.done" and event.output_index in blocks:
            yield _end_item(assembler, blocks.pop(event.output_index), event.item)
        # The ChatGPT (Codex) backend may end with `response.done`, its name for completed.
        elif kind in ("response.completed", "response.incomplete", "response.done"):
            _finish(assembler, event.response)
            finished = True
        elif kind == "response.failed":
            raise ProviderError(_failure_text(event.response))
        elif kind == "error":
            code = getattr(event, "code", None)
            raise ProviderError(f"{code}: {event.message}" if code else str(event.message))
    for end in assembler.end_open_blocks():
        yield end
    if not finished:
        raise IncompleteStreamError("The response stream ended before the provider finished the response")


def _start_item(assembler: MessageAssembler, item: Any) -> TextStart | ThinkingStart | ToolCallStart | None:
    if item.type == "reasoning":
        return assembler.begin_thinking()
    if item.type == "message":
        return assembler.begin_text()
    if item.type == "function_call":
        return assembler.begin_tool_call(f"{item.call_id}|{item.id}", item.name, item.arguments or "")
    return None


def _block_text(assembler: MessageAssembler, index: int) -> str:
    block = assembler.message.content[index]
    return block.thinking if isinstance(block, ThinkingContent) else ""


def _end_item(assembler: MessageAssembler, index: int, item: Any) -> AssistantMessageEvent:
    if item.type == "reasoning":
        summary = "\n\n".join(part.text for part in item.summary or [])
        signature = json.dumps(item.model_dump(mode="json", exclude_none=True))
        return assembler.end_thinking(index, text=summary or None, signature=signature)
    if item.type == "message":
        text = "".join(
            part.text if part.type == "output_text" else getattr(part, "refusal", "")
            for part in item.content or []
        )
        return assembler.end_text(index, text=text, signature=item.id)
    return assembler.end_tool_call(index, arguments_json=item.arguments or None)


def _finish(assembler: MessageAssembler, response: Any) -> None:
    assembler.set_response_id(response.id)
    usage = response.usage
    if usage is not None:
        # input_tokens includes cached tokens; cache writes are reported by some proxies.
        details = getattr(usage, "input_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) or 0
        written = getattr(details, "cache_write_tokens", None) or 0
        assembler.set_usage(
            input=(usage.input_tokens or 0) - cached - written,
            output=usage.output_tokens or 0,
            cache_read=cached,
            cache_write=written,
        )
    assembler.set_stop_reason(_stop_reason(response, assembler.has_tool_calls()))


def _stop_reason(response: Any, has_tool_calls: bool) -> StopReason:
    status = response.status
    if status == "incomplete":
        details = getattr(response, "incomplete_details", None)
        if getattr(details, "reason", None) == "content_filter":
            raise ProviderError("The provider's content filter stopped the response")
        return "length"
    if status in ("failed", "cancelled"):
        raise ProviderError(_failure_text(response))
    return "toolUse" if has_tool_calls else "stop"


def _failure_text(response: Any) -> str:
    error = getattr(response, "error", None)
    if error is not None:
        return f"{error.code or 'error'}: {error.message or 'the provider gave no details'}"
    details = getattr(response, "incomplete_details", None)
    if details is not None and details.reason:
        return f"The response was left incomplete: {details.reason}"
    return "The provider reported that the response failed, without details"
