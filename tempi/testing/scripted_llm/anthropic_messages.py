"""Anthropic messages (`POST /v1/messages`): content-block events, usage and errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tempi.testing.scripted_llm.scenario import ScriptedTurn, ScriptedUsage
from tempi.testing.scripted_llm.wire import (
    ApiName,
    RoleMessagesWire,
    SseEvent,
    WireError,
    compact_json,
    model_of,
    new_hex,
    pieces,
    scripted_signature,
)

CONTEXT_WINDOW = 200_000

_ERROR_TYPES: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "Not found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization. Please try again later.",
    ),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


def _error(status: int, type_: str, message: str) -> WireError:
    body = {"type": "error", "error": {"type": type_, "message": message}, "request_id": f"req_{new_hex(24)}"}
    return WireError(status=status, body=body)


def _stop_reason(turn: ScriptedTurn) -> str:
    if turn.stop_reason == "length":
        return "max_tokens"
    return "tool_use" if turn.tool_calls else "end_turn"


def _usage(usage: ScriptedUsage, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": usage.input,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cache_read,
        "output_tokens": output_tokens,
    }


def _blocks(turn: ScriptedTurn) -> list[dict[str, Any]]:
    """The finished content blocks of a turn, in the order they stream."""
    blocks: list[dict[str, Any]] = []
    if turn.thinking:
        blocks.append(
            {"type": "thinking", "thinking": turn.thinking, "signature": scripted_signature(turn.thinking)}
        )
    if turn.text is not None:
        blocks.append({"type": "text", "text": turn.text})
    for index, call in enumerate(turn.tool_calls):
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_{index}_{new_hex(6)}",
                "name": call.name,
                "input": call.arguments,
            }
        )
    return blocks


def _block_events(index: int, block: dict[str, Any], chunk_size: int) -> Iterator[SseEvent]:
    def delta(payload: dict[str, Any]) -> SseEvent:
        return SseEvent(
            {"type": "content_block_delta", "index": index, "delta": payload}, "content_block_delta"
        )

    kind = block["type"]
    start: dict[str, Any]
    if kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
    elif kind == "text":
        start = {"type": "text", "text": ""}
    else:
        start = {**block, "input": {}}
    yield SseEvent(
        {"type": "content_block_start", "index": index, "content_block": start}, "content_block_start"
    )
    if kind == "thinking":
        for piece in pieces(block["thinking"], chunk_size):
            yield delta({"type": "thinking_delta", "thinking": piece})
        yield delta({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "text":
        for piece in pieces(block["text"], chunk_size):
            yield delta({"type": "text_delta", "text": piece})
    else:
        # Anthropic opens every tool input with an empty partial_json.
        yield delta({"type": "input_json_delta", "partial_json": ""})
        for piece in pieces(compact_json(block["input"]), chunk_size):
            yield delta({"type": "input_json_delta", "partial_json": piece})
    yield SseEvent({"type": "content_block_stop", "index": index}, "content_block_stop")


class AnthropicMessagesWire(RoleMessagesWire):
    name: ApiName = "anthropic-messages"

    def stream(self, turn: ScriptedTurn, request: dict[str, Any]) -> Iterator[SseEvent]:
        message = self._message(turn, request, content=[], stop_reason=None)
        message["usage"] = _usage(turn.usage, min(1, turn.usage.output))
        yield SseEvent({"type": "message_start", "message": message}, "message_start")
        yield SseEvent({"type": "ping"}, "ping")
        for index, block in enumerate(_blocks(turn)):
            yield from _block_events(index, block, turn.chunk_size)
        yield SseEvent(
            {
                "type": "message_delta",
                "delta": {"stop_reason": _stop_reason(turn), "stop_sequence": None},
                "usage": _usage(turn.usage, turn.usage.output),
            },
            "message_delta",
        )
        yield SseEvent({"type": "message_stop"}, "message_stop")

    def complete(self, turn: ScriptedTurn, request: dict[str, Any]) -> dict[str, Any]:
        return self._message(turn, request, content=_blocks(turn), stop_reason=_stop_reason(turn))

    @staticmethod
    def _message(
        turn: ScriptedTurn, request: dict[str, Any], content: list[dict[str, Any]], stop_reason: str | None
    ) -> dict[str, Any]:
        return {
            "id": f"msg_{new_hex(24)}",
            "type": "message",
            "role": "assistant",
            "model": model_of(request),
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": _usage(turn.usage, turn.usage.output),
        }

    def overflow(self, request_tokens: int) -> WireError:
        tokens = max(CONTEXT_WINDOW + 1, request_tokens)
        return _error(
            400, "invalid_request_error", f"prompt is too long: {tokens} tokens > {CONTEXT_WINDOW} maximum"
        )

    def failure(self, status: int) -> WireError:
        fallback = "api_error" if status >= 500 else "invalid_request_error"
        type_, message = _ERROR_TYPES.get(status, (fallback, f"Scripted failure (HTTP {status})."))
        return _error(status, type_, message)

    def bad_request(self, message: str, status: int = 400) -> WireError:
        type_, _ = _ERROR_TYPES.get(status, ("invalid_request_error", ""))
        return _error(status, type_, message)
