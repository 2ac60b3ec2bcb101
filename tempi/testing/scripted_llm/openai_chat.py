"""OpenAI chat completions (`POST /v1/chat/completions`): chunks, usage and errors."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from tempi.testing.scripted_llm.openai_errors import (
    CONTEXT_WINDOW,
    openai_bad_request,
    openai_error,
    openai_failure,
)
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


def _finish_reason(turn: ScriptedTurn) -> str:
    if turn.stop_reason == "length":
        return "length"
    return "tool_calls" if turn.tool_calls else "stop"


def _usage(usage: ScriptedUsage) -> dict[str, Any]:
    # OpenAI counts cached prompt tokens inside prompt_tokens; cache writes are reported the
    # way OpenRouter does (prompt_tokens_details.cache_write_tokens), only when there are any.
    prompt = usage.input + usage.cache_read + usage.cache_write
    prompt_details: dict[str, Any] = {"cached_tokens": usage.cache_read, "audio_tokens": 0}
    if usage.cache_write:
        prompt_details["cache_write_tokens"] = usage.cache_write
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output,
        "total_tokens": prompt + usage.output,
        "prompt_tokens_details": prompt_details,
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _call_id(index: int, call: ScriptedToolCall) -> str:
    return call.id or f"call_{index}_{new_hex(6)}"


class OpenAIChatWire(RoleMessagesWire):
    name: ApiName = "openai-completions"

    def stream(self, turn: ScriptedTurn, request: dict[str, Any]) -> Iterator[SseEvent]:
        stream_options = request.get("stream_options")
        include_usage = isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))
        head: dict[str, Any] = {
            "id": f"chatcmpl-{new_hex(12)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model_of(request),
            "system_fingerprint": None,
        }

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> SseEvent:
            data = {
                **head,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }
            if include_usage:
                # With include_usage every chunk carries usage: null until the final one.
                data["usage"] = None
            return SseEvent(data)

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in pieces(turn.thinking or "", turn.chunk_size):
            yield chunk({"reasoning_content": piece})
        for piece in pieces(turn.text or "", turn.chunk_size):
            yield chunk({"content": piece})
        for index, call in enumerate(turn.tool_calls):
            opening = {
                "index": index,
                "id": _call_id(index, call),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            yield chunk({"tool_calls": [opening]})
            for piece in pieces(compact_json(call.arguments), turn.chunk_size):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, _finish_reason(turn))
        if include_usage:
            yield SseEvent({**head, "choices": [], "usage": _usage(turn.usage)})
        yield SseEvent("[DONE]")

    def complete(self, turn: ScriptedTurn, request: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": turn.text,
            "refusal": None,
            "annotations": [],
        }
        if turn.thinking:
            message["reasoning_content"] = turn.thinking
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": _call_id(index, call),
                    "type": "function",
                    "function": {"name": call.name, "arguments": compact_json(call.arguments)},
                }
                for index, call in enumerate(turn.tool_calls)
            ]
        return {
            "id": f"chatcmpl-{new_hex(12)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_of(request),
            "system_fingerprint": None,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(turn)}
            ],
            "usage": _usage(turn.usage),
        }

    def overflow(self, request_tokens: int) -> WireError:
        tokens = max(CONTEXT_WINDOW + 1, request_tokens)
        message = (
            f"This model's maximum context length is {CONTEXT_WINDOW} tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages."
        )
        return openai_error(400, message, "invalid_request_error", "context_length_exceeded", "messages")

    def failure(self, status: int) -> WireError:
        return openai_failure(status)

    def bad_request(self, message: str, status: int = 400) -> WireError:
        return openai_bad_request(message, status)
