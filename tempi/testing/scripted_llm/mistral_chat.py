"""Mistral chat completions (`POST /v1/chat/completions` at api.mistral.ai): Mistral's chunks.

Close to OpenAI's but not the same: thinking arrives as typed content chunks
(`{"type": "thinking", "thinking": [{"type": "text", ...}]}`), a tool call comes whole in
one chunk with a 9-character id, usage rides on the chunk with the finish reason, and
errors are Mistral's bodies.
"""

from __future__ import annotations

import secrets
import string
import time
from collections.abc import Iterator
from typing import Any

from tempi.testing.scripted_llm.openai_errors import CONTEXT_WINDOW
from tempi.testing.scripted_llm.scenario import ScriptedToolCall, ScriptedTurn, ScriptedUsage
from tempi.testing.scripted_llm.wire import (
    ApiName,
    RoleMessagesWire,
    SseEvent,
    WireError,
    compact_json,
    model_of,
    new_hex,
    pieces,
)

_ID_ALPHABET = string.ascii_letters + string.digits

# (message, type) as Mistral sends them for each status a scenario may inject.
_FAILURES: dict[int, tuple[str, str]] = {
    401: ("Unauthorized", "authentication_error"),
    429: ("Requests rate limit exceeded", "rate_limited"),
    500: ("Internal server error", "internal_server_error"),
    503: ("Service unavailable", "service_unavailable"),
}


def _error(status: int, message: str, type_: str, code: str | None = None) -> WireError:
    body = {"object": "error", "message": message, "type": type_, "param": None, "code": code}
    return WireError(status=status, body=body)


def _tool_call(index: int, call: ScriptedToolCall) -> dict[str, Any]:
    # A 9-character id, and the whole call in one piece.
    call_id = call.id or "".join(secrets.choice(_ID_ALPHABET) for _ in range(9))
    function = {"name": call.name, "arguments": compact_json(call.arguments)}
    return {"id": call_id, "function": function, "index": index}


def _usage(usage: ScriptedUsage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.input,
        "completion_tokens": usage.output,
        "total_tokens": usage.input + usage.output,
    }


def _finish_reason(turn: ScriptedTurn) -> str:
    if turn.stop_reason == "length":
        return "length"
    return "tool_calls" if turn.tool_calls else "stop"


class MistralChatWire(RoleMessagesWire):
    name: ApiName = "mistral-conversations"

    def stream(self, turn: ScriptedTurn, request: dict[str, Any]) -> Iterator[SseEvent]:
        head = {
            "id": new_hex(32),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model_of(request),
        }

        def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> SseEvent:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            return SseEvent({**head, "choices": [choice], **extra})

        yield chunk({"role": "assistant", "content": ""})
        for piece in pieces(turn.thinking or "", turn.chunk_size):
            yield chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": piece}]}]})
        for piece in pieces(turn.text or "", turn.chunk_size):
            yield chunk({"content": piece})
        for index, call in enumerate(turn.tool_calls):
            yield chunk({"tool_calls": [_tool_call(index, call)]})
        yield chunk({"content": ""}, _finish_reason(turn), usage=_usage(turn.usage))
        yield SseEvent("[DONE]")

    def complete(self, turn: ScriptedTurn, request: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or "", "tool_calls": None}
        if turn.tool_calls:
            message["tool_calls"] = [_tool_call(index, call) for index, call in enumerate(turn.tool_calls)]
        return {
            "id": new_hex(32),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_of(request),
            "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(turn)}],
            "usage": _usage(turn.usage),
        }

    def overflow(self, request_tokens: int) -> WireError:
        tokens = max(CONTEXT_WINDOW + 1, request_tokens)
        message = (
            f"Prompt contains {tokens} tokens and 0 draft tokens, too large for model with "
            f"{CONTEXT_WINDOW} maximum context length"
        )
        return _error(400, message, "invalid_request_error", "3051")

    def failure(self, status: int) -> WireError:
        message, type_ = _FAILURES.get(
            status, (f"Scripted failure (HTTP {status}).", "invalid_request_error")
        )
        return _error(status, message, type_)

    def bad_request(self, message: str, status: int = 400) -> WireError:
        return _error(status, message, "invalid_request_error")
