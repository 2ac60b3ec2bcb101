"""OpenAI responses (`POST /v1/responses`): typed SSE events, output items and usage."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from tempi.testing.scripted_llm.openai_errors import openai_bad_request, openai_error, openai_failure
from tempi.testing.scripted_llm.scenario import ScriptedTurn, ScriptedUsage
from tempi.testing.scripted_llm.wire import (
    ApiName,
    SseEvent,
    WireError,
    compact_json,
    messages_of,
    model_of,
    new_hex,
    pieces,
    text_of,
)

_ASSISTANT_SIDE_TYPES = ("function_call", "reasoning")


def _is_assistant_side(item: dict[str, Any]) -> bool:
    kind = item.get("type", "message")
    if kind == "message":
        return item.get("role") == "assistant"
    return kind in _ASSISTANT_SIDE_TYPES


def _usage(usage: ScriptedUsage) -> dict[str, Any]:
    # input_tokens includes the cached part, as OpenAI reports it.
    input_tokens = usage.input + usage.cache_read + usage.cache_write
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read, "cache_write_tokens": usage.cache_write},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + usage.output,
    }


class _ResponsePlan:
    """The output items of one turn, built once so streamed and final views agree."""

    def __init__(self, turn: ScriptedTurn, request: dict[str, Any]) -> None:
        self.turn = turn
        self.request = request
        self.response_id = f"resp_{new_hex(32)}"
        self.created_at = int(time.time())
        self.truncated = turn.stop_reason == "length"
        self.items: list[dict[str, Any]] = []
        if turn.thinking:
            reasoning: dict[str, Any] = {
                "id": f"rs_{new_hex(32)}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": turn.thinking}],
            }
            include = request.get("include")
            if isinstance(include, list) and "reasoning.encrypted_content" in include:
                # What a store=false client must send back to continue from this reasoning.
                reasoning["encrypted_content"] = f"enc_{new_hex(48)}"
            self.items.append(reasoning)
        if turn.text is not None:
            self.items.append(
                {
                    "id": f"msg_{new_hex(32)}",
                    "type": "message",
                    "status": "incomplete" if self.truncated else "completed",
                    "content": [self.text_part(turn.text)],
                    "role": "assistant",
                }
            )
        for index, call in enumerate(turn.tool_calls):
            self.items.append(
                {
                    "id": f"fc_{new_hex(32)}",
                    "type": "function_call",
                    "status": "completed",
                    "arguments": compact_json(call.arguments),
                    "call_id": call.id or f"call_{index}_{new_hex(24)}",
                    "name": call.name,
                }
            )

    @staticmethod
    def text_part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}

    def response(
        self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
    ) -> dict[str, Any]:
        request = self.request
        tools = request.get("tools")
        reasoning = request.get("reasoning")
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": request.get("instructions"),
            "max_output_tokens": request.get("max_output_tokens"),
            "model": model_of(request),
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": request.get("previous_response_id"),
            "reasoning": reasoning if isinstance(reasoning, dict) else {"effort": None, "summary": None},
            "store": request.get("store", True),
            "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": request.get("tool_choice", "auto"),
            "tools": tools if isinstance(tools, list) else [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": {},
        }

    def final_response(self) -> dict[str, Any]:
        status = "incomplete" if self.truncated else "completed"
        return self.response(status, self.items, _usage(self.turn.usage))


class _Sequencer:
    def __init__(self) -> None:
        self.number = 0

    def event(self, type_: str, **fields: Any) -> SseEvent:
        data = {"type": type_, "sequence_number": self.number, **fields}
        self.number += 1
        return SseEvent(data, event=type_)


def _stream_item(seq: _Sequencer, index: int, item: dict[str, Any], chunk_size: int) -> Iterator[SseEvent]:
    item_id = item["id"]
    kind = item["type"]
    if kind == "reasoning":
        text = item["summary"][0]["text"]
        yield seq.event("response.output_item.added", output_index=index, item={**item, "summary": []})
        where = {"item_id": item_id, "output_index": index, "summary_index": 0}
        yield seq.event(
            "response.reasoning_summary_part.added", **where, part={"type": "summary_text", "text": ""}
        )
        for piece in pieces(text, chunk_size):
            yield seq.event("response.reasoning_summary_text.delta", **where, delta=piece)
        yield seq.event("response.reasoning_summary_text.done", **where, text=text)
        yield seq.event(
            "response.reasoning_summary_part.done", **where, part={"type": "summary_text", "text": text}
        )
    elif kind == "message":
        text = item["content"][0]["text"]
        yield seq.event(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        yield seq.event("response.content_part.added", **where, part=_ResponsePlan.text_part(""))
        for piece in pieces(text, chunk_size):
            yield seq.event("response.output_text.delta", **where, delta=piece, logprobs=[])
        yield seq.event("response.output_text.done", **where, text=text, logprobs=[])
        yield seq.event("response.content_part.done", **where, part=_ResponsePlan.text_part(text))
    else:
        arguments = item["arguments"]
        yield seq.event(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "arguments": ""},
        )
        for piece in pieces(arguments, chunk_size):
            yield seq.event(
                "response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece
            )
        yield seq.event(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            name=item["name"],
            arguments=arguments,
        )
    yield seq.event("response.output_item.done", output_index=index, item=item)


class OpenAIResponsesWire:
    name: ApiName = "openai-responses"

    def assistant_turns(self, body: dict[str, Any]) -> int:
        # A turn may be reasoning + message + calls: consecutive assistant-side items are one turn.
        turns = 0
        inside_turn = False
        for item in messages_of(body, "input"):
            assistant_side = _is_assistant_side(item)
            if assistant_side and not inside_turn:
                turns += 1
            inside_turn = assistant_side
        return turns

    def final_user_text(self, body: dict[str, Any]) -> str:
        given = body.get("input")
        if isinstance(given, str):
            return given
        items = messages_of(body, "input")
        if not items or items[-1].get("type", "message") != "message" or items[-1].get("role") != "user":
            return ""
        return text_of(items[-1].get("content"), ("input_text",))

    def stream(self, turn: ScriptedTurn, request: dict[str, Any]) -> Iterator[SseEvent]:
        plan = _ResponsePlan(turn, request)
        seq = _Sequencer()
        yield seq.event("response.created", response=plan.response("in_progress", [], None))
        yield seq.event("response.in_progress", response=plan.response("in_progress", [], None))
        for index, item in enumerate(plan.items):
            yield from _stream_item(seq, index, item, turn.chunk_size)
        final = plan.final_response()
        # A response cut short by max_output_tokens ends with response.incomplete, not completed.
        yield seq.event(f"response.{final['status']}", response=final)

    def complete(self, turn: ScriptedTurn, request: dict[str, Any]) -> dict[str, Any]:
        return _ResponsePlan(turn, request).final_response()

    def overflow(self, request_tokens: int) -> WireError:
        message = (
            "Your input exceeds the context window of this model. Please adjust your input and try again."
        )
        return openai_error(400, message, "invalid_request_error", "context_length_exceeded", "input")

    def failure(self, status: int) -> WireError:
        return openai_failure(status)

    def bad_request(self, message: str, status: int = 400) -> WireError:
        return openai_bad_request(message, status)
