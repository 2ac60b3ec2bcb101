"""Gemini's `generateContent` wire format, shared by the Gemini API (`google-generative-ai`)
and Vertex AI (`google-vertex`): the request body pi sends, the SSE stream read into pi's
events, and Google's error bodies.

Spoken with plain httpx rather than the `google-genai` SDK: the SDK holds a thought
signature as bytes and sends it back URL-safe base64 encoded, so the signature Gemini sent
would not be replayed as it came (pi replays it verbatim), and its import costs about a
second of CPU on a worker's first Gemini call. The body is pi's, field for field.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from typing import Any

import httpx

from tempi.activities.llm.abort import AbortWatch
from tempi.activities.llm.assembler import MessageAssembler, now_ms
from tempi.activities.llm.contract import StreamOptions, output_token_limit
from tempi.activities.llm.conversation_cache import CONVERSATIONS, ListConverter
from tempi.activities.llm.errors import (
    IncompleteStreamError,
    ProviderError,
    format_retry_after,
    retry_after_seconds,
)
from tempi.activities.llm.google_thinking import GoogleApi, thinking_config
from tempi.activities.llm.http_pool import shared_http_client
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

# Gemini models get no tool-call ids; Claude and gpt-oss models behind Google's APIs need
# them in Anthropic's alphabet.
GOOGLE_TOOL_IDS = ToolIdFormat(max_length=64)
IMAGE_ONLY_RESULT_TEXT = "(see attached image)"
TOOL_IMAGES_TEXT = "Tool result image:"

_STOP_REASONS: dict[str, StopReason] = {"STOP": "stop", "MAX_TOKENS": "length"}
_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_GEMINI_MAJOR = re.compile(r"^gemini(?:-live)?-(\d+)")
_RETRY_DELAY = re.compile(r"^(\d+(?:\.\d+)?)s$")
_tool_call_counter = itertools.count(1)


# -- the request --------------------------------------------------------------------------


def build_request(
    model: ModelSpec, context: LlmContext, options: StreamOptions, api: GoogleApi
) -> dict[str, Any]:
    """The request body, in the shape pi sends."""
    body: dict[str, Any] = {
        "contents": CONVERSATIONS.convert(
            (api, options.session_id),
            context.messages,
            model,
            lambda: (ConversationRepair(model, GOOGLE_TOOL_IDS), GeminiConverter(model)),
        )
    }
    if context.system_prompt:
        body["systemInstruction"] = {"parts": [{"text": context.system_prompt}], "role": "user"}
    if context.tools:
        body["tools"] = convert_tools(context.tools)
    generation: dict[str, Any] = {}
    if options.temperature is not None:
        generation["temperature"] = options.temperature
    generation["maxOutputTokens"] = output_token_limit(model, options)
    thinking = thinking_config(model, options.thinking_level, api)
    if thinking is not None:
        generation["thinkingConfig"] = thinking
    body["generationConfig"] = generation
    return body


def convert_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    declarations = [
        {"name": tool.name, "description": tool.description, "parametersJsonSchema": tool.parameters}
        for tool in tools
    ]
    return [{"functionDeclarations": declarations}]


def requires_tool_call_id(model: ModelSpec) -> bool:
    return model.id.startswith(("claude-", "gpt-oss-"))


def _multimodal_function_response(model: ModelSpec) -> bool:
    """Gemini 3 takes a tool result's images inside the functionResponse; Gemini 1 and 2
    need them in a user turn of their own."""
    match = _GEMINI_MAJOR.match(model.id.lower())
    return match is None or int(match.group(1)) >= 3


def _valid_signature(signature: str | None) -> str | None:
    """Google takes thought signatures as base64 bytes; anything else would fail the call."""
    if signature and len(signature) % 4 == 0 and _BASE64.match(signature):
        return signature
    return None


class GeminiConverter(ListConverter):
    """Repaired messages to Gemini `contents`, one at a time (see `conversation_cache`).

    Thinking of another model arrives here as text already (`transform.py`), and tool calls
    of another model without their signatures, so every thought kept is this model's own."""

    def __init__(self, model: ModelSpec) -> None:
        super().__init__()
        self.model = model

    def add(self, message: LlmMessage) -> None:
        if isinstance(message, UserMessage):
            parts = _user_parts(message)
            if parts:
                self.converted.append({"role": "user", "parts": parts})
        elif isinstance(message, AssistantMessage):
            parts = self._model_parts(message)
            if parts:
                self.converted.append({"role": "model", "parts": parts})
        else:
            self._add_tool_result(message)

    def _model_parts(self, message: AssistantMessage) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextContent):
                if block.text.strip():
                    parts.append(_signed({"text": block.text}, block.text_signature))
            elif isinstance(block, ThinkingContent):
                if block.thinking.strip() and not block.redacted:
                    parts.append(_signed({"thought": True, "text": block.thinking}, block.thinking_signature))
            else:
                call: dict[str, Any] = {"name": block.name, "args": block.arguments}
                if requires_tool_call_id(self.model):
                    call["id"] = block.id
                parts.append(_signed({"functionCall": call}, block.thought_signature))
        return parts

    def _add_tool_result(self, message: ToolResultMessage) -> None:
        text = "\n".join(block.text for block in message.content if isinstance(block, TextContent))
        images = (
            [_inline(block) for block in message.content if isinstance(block, ImageContent)]
            if self.model.supports_images
            else []
        )
        value = text if text else IMAGE_ONLY_RESULT_TEXT if images else ""
        response: dict[str, Any] = {
            "name": message.tool_name,
            "response": {"error" if message.is_error else "output": value},
        }
        nested = bool(images) and _multimodal_function_response(self.model)
        if nested:
            response["parts"] = images
        if requires_tool_call_id(self.model):
            response["id"] = message.tool_call_id
        part = {"functionResponse": response}
        previous = self.converted[-1] if self.converted else None
        if (
            previous is not None
            and previous["role"] == "user"
            and any("functionResponse" in p for p in previous["parts"])
        ):
            # Replaced, not extended: an earlier call's state may share the turn.
            self.converted[-1] = {**previous, "parts": [*previous["parts"], part]}
        else:
            self.converted.append({"role": "user", "parts": [part]})
        if images and not nested:
            self.converted.append({"role": "user", "parts": [{"text": TOOL_IMAGES_TEXT}, *images]})


def _signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
    valid = _valid_signature(signature)
    return {**part, "thoughtSignature": valid} if valid else part


def _inline(image: ImageContent) -> dict[str, Any]:
    return {"inlineData": {"mimeType": image.mime_type, "data": image.data}}


def _user_parts(message: UserMessage) -> list[dict[str, Any]]:
    if isinstance(message.content, str):
        return [{"text": message.content}]
    return [
        {"text": block.text} if isinstance(block, TextContent) else _inline(block)
        for block in message.content
    ]


# -- the call -----------------------------------------------------------------------------


def _new_http_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=None)


async def stream_generate_content(
    url: str,
    headers: Mapping[str, str],
    body: dict[str, Any],
    options: StreamOptions,
    assembler: MessageAssembler,
    abort: AbortWatch,
    rejected_hint: str,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    """POST `body` to a `…:streamGenerateContent?alt=sse` URL and stream pi's events.

    `rejected_hint` says what to check when Google refuses the credentials; it is added to
    401, 403 and key-related 400 errors. pi's Google SDK retries nothing by itself, so every
    failure goes straight to the agent's retry counting."""
    client = shared_http_client(_new_http_client)
    request = client.build_request(
        "POST",
        url,
        headers={"content-type": "application/json", **headers},
        # A lone surrogate (from a tool's output, say) cannot travel in UTF-8; pi drops them.
        content=json.dumps(body, ensure_ascii=False).encode("utf-8", "replace"),
        timeout=options.timeout_s,
    )
    response = await abort.run(client.send(request, stream=True))
    try:
        if response.status_code != 200:
            raw = await abort.run(response.aread())
            raise ProviderError(
                describe_http_error(response.status_code, raw, response.headers, rejected_hint)
            )
        reader = _StreamReader(assembler)
        async with contextlib.aclosing(abort.iterate(_sse_chunks(response))) as chunks:
            async for event in reader.events(chunks):
                yield event
    finally:
        await response.aclose()


async def _sse_chunks(response: httpx.Response) -> AsyncGenerator[Any, None]:
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []
    if data:
        yield json.loads("\n".join(data))


class _StreamReader:
    """GenerateContentResponse chunks to pi's events, as pi's google providers read them."""

    def __init__(self, assembler: MessageAssembler) -> None:
        self.assembler = assembler
        self.open: int | None = None  # the text or thinking block parts are added to
        self.signature: str | None = None  # its last non-empty thoughtSignature
        self.finish: str | None = None

    async def events(self, chunks: AsyncIterator[Any]) -> AsyncGenerator[AssistantMessageEvent, None]:
        assembler = self.assembler
        async for chunk in chunks:
            if not isinstance(chunk, dict):
                continue
            if "error" in chunk:
                raise ProviderError(_describe_error_body(chunk, None))
            if assembler.message.response_id is None:
                assembler.set_response_id(chunk.get("responseId"))
            blocked = (chunk.get("promptFeedback") or {}).get("blockReason")
            if blocked:
                raise ProviderError(f"Gemini refused the prompt (block reason: {blocked})")
            candidates = chunk.get("candidates") or [{}]
            candidate = candidates[0]
            for part in (candidate.get("content") or {}).get("parts") or []:
                for event in self._part(part):
                    yield event
            if candidate.get("finishReason"):
                self.finish = candidate["finishReason"]
            if chunk.get("usageMetadata"):
                self._usage(chunk["usageMetadata"])
        end = self._close()
        if end is not None:
            yield end
        if self.finish is None:
            raise IncompleteStreamError("The response stream ended before Gemini finished the message")
        if assembler.has_tool_calls():
            assembler.set_stop_reason("toolUse")
        elif self.finish in _STOP_REASONS:
            assembler.set_stop_reason(_STOP_REASONS[self.finish])
        else:
            raise ProviderError(f"Gemini ended the response with finish reason {self.finish}")

    def _part(self, part: dict[str, Any]) -> Iterator[AssistantMessageEvent]:
        assembler = self.assembler
        signature = part.get("thoughtSignature")
        text = part.get("text")
        if isinstance(text, str):
            thinking = part.get("thought") is True
            block = assembler.message.content[self.open] if self.open is not None else None
            if block is None or isinstance(block, ThinkingContent) != thinking:
                end = self._close()
                if end is not None:
                    yield end
                start = assembler.begin_thinking() if thinking else assembler.begin_text()
                self.open = start.content_index
                yield start
            assert self.open is not None
            if isinstance(signature, str) and signature:
                self.signature = signature
            yield assembler.add_thinking(self.open, text) if thinking else assembler.add_text(self.open, text)
        call = part.get("functionCall")
        if isinstance(call, dict):
            end = self._close()
            if end is not None:
                yield end
            name = str(call.get("name") or "")
            call_id = call.get("id")
            if not call_id or any(getattr(b, "id", None) == call_id for b in assembler.message.content):
                call_id = f"{name}_{now_ms()}_{next(_tool_call_counter)}"
            start_call = assembler.begin_tool_call(
                str(call_id),
                name,
                thought_signature=signature if isinstance(signature, str) and signature else None,
            )
            yield start_call
            index = start_call.content_index
            yield assembler.add_tool_arguments(index, json.dumps(call.get("args") or {}))
            yield assembler.end_tool_call(index)

    def _close(self) -> AssistantMessageEvent | None:
        index, self.open = self.open, None
        signature, self.signature = self.signature, None
        if index is None:
            return None
        if isinstance(self.assembler.message.content[index], ThinkingContent):
            return self.assembler.end_thinking(index, signature=signature)
        return self.assembler.end_text(index, signature=signature)

    def _usage(self, usage: dict[str, Any]) -> None:
        cached = _count(usage, "cachedContentTokenCount")
        self.assembler.set_usage(
            input=_count(usage, "promptTokenCount") - cached,
            output=_count(usage, "candidatesTokenCount") + _count(usage, "thoughtsTokenCount"),
            cache_read=cached,
        )


def _count(usage: dict[str, Any], field: str) -> int:
    value = usage.get(field)
    return value if isinstance(value, int) else 0


# -- errors -------------------------------------------------------------------------------


def describe_http_error(status: int, raw: bytes, headers: Mapping[str, str], rejected_hint: str) -> str:
    """`429 RESOURCE_EXHAUSTED: … (retry after 30s)`: the status first, as `classify_error` reads it."""
    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = raw.decode("utf-8", "replace").strip()
    message = _describe_error_body(body, status)
    if status in (401, 403) or (status == 400 and _about_credentials(message)):
        message += f" ({rejected_hint})"
    wait = retry_after_seconds(headers)
    if wait is None:
        wait = _retry_delay(body)
    return message + (format_retry_after(wait) if wait is not None else "")


def _error_object(body: Any) -> dict[str, Any] | None:
    # A stream refused at once answers with a JSON array of one error.
    if isinstance(body, list) and body:
        body = body[0]
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error: dict[str, Any] = body["error"]
        return error
    return None


def _describe_error_body(body: Any, status: int | None) -> str:
    error = _error_object(body)
    if error is None:
        text = body if isinstance(body, str) and body else "Gemini gave no details"
        return f"{status} {text}" if status else text
    code = error.get("code")
    shown_status = status or (code if isinstance(code, int) else None)
    kind = error.get("status")
    head = " ".join(str(part) for part in (shown_status, kind) if part)
    message = str(error.get("message") or json.dumps(error)[:500])
    return f"{head}: {message}" if head else message


def _about_credentials(message: str) -> bool:
    lowered = message.lower()
    return "api key" in lowered or "api_key" in lowered or "credential" in lowered


def _retry_delay(body: Any) -> float | None:
    """The wait a RESOURCE_EXHAUSTED error's RetryInfo detail asks for (`"retryDelay": "37s"`)."""
    error = _error_object(body)
    for detail in (error or {}).get("details") or []:
        if isinstance(detail, dict) and isinstance(detail.get("retryDelay"), str):
            match = _RETRY_DELAY.match(detail["retryDelay"])
            if match:
                return float(match.group(1))
    return None
