"""Amazon Bedrock ConverseStream (`POST /model/{modelId}/converse-stream`): AWS event-stream
frames, usage, exceptions, and the SigV4 or bearer check of every request."""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from typing import Any

from tempi.testing.scripted_llm.aws_eventstream import CONTENT_TYPE, EventFrame
from tempi.testing.scripted_llm.bedrock_auth import check_request
from tempi.testing.scripted_llm.scenario import ScriptedTurn, ScriptedUsage
from tempi.testing.scripted_llm.wire import (
    ApiName,
    RoleMessagesWire,
    WireError,
    compact_json,
    last_user_content,
    pieces,
    scripted_signature,
    untyped_text_of,
)

CONTEXT_WINDOW = 200_000

# (exception name, message) as Bedrock sends them for each status a scenario may inject.
_FAILURES: dict[int, tuple[str, str]] = {
    400: ("ValidationException", "Malformed input request, please reformat your input and try again."),
    403: ("AccessDeniedException", "You don't have access to the model with the specified model ID."),
    404: (
        "ResourceNotFoundException",
        "Could not resolve the foundation model from the provided model identifier.",
    ),
    424: ("ModelErrorException", "The model returned an error."),
    429: ("ThrottlingException", "Too many requests, please wait before trying your request again."),
    500: ("InternalServerException", "The server encountered an internal error."),
    503: ("ServiceUnavailableException", "Bedrock is unable to process your request."),
}
# A stream exception's message, by its frame type (`:exception-type`).
STREAM_EXCEPTIONS: dict[str, str] = {
    "throttlingException": "Too many tokens, please wait before trying again.",
    "modelStreamErrorException": "The model stream encountered an error. Retry your request.",
    "internalServerException": "The server encountered an internal error.",
    "serviceUnavailableException": "Bedrock is unable to process your request.",
    "validationException": "The model returned the following errors: Input is too long for requested model.",
}


def _error(status: int, error_type: str, message: str) -> WireError:
    # Bedrock names the exception in a header; the body holds only the message.
    return WireError(
        status=status,
        body={"message": message},
        headers={"x-amzn-ErrorType": f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"},
    )


def _padding() -> str:
    # Bedrock pads every event with a random `p` field so sizes reveal nothing.
    return "".join(random.choices(string.ascii_letters, k=random.randint(1, 24)))


def _event(kind: str, payload: dict[str, Any]) -> EventFrame:
    return EventFrame(kind, {**payload, "p": _padding()})


def _stop_reason(turn: ScriptedTurn) -> str:
    if turn.stop_reason == "length":
        return "max_tokens"
    return "tool_use" if turn.tool_calls else "end_turn"


def _usage(usage: ScriptedUsage) -> dict[str, Any]:
    return {
        "inputTokens": usage.input,
        "outputTokens": usage.output,
        "totalTokens": usage.input + usage.output + usage.cache_read + usage.cache_write,
        "cacheReadInputTokens": usage.cache_read,
        "cacheWriteInputTokens": usage.cache_write,
    }


def _tool_use_id() -> str:
    return "tooluse_" + "".join(random.choices(string.ascii_letters + string.digits, k=22))


def _delta(index: int, delta: dict[str, Any]) -> EventFrame:
    return _event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})


class BedrockConverseWire(RoleMessagesWire):
    name: ApiName = "bedrock-converse-stream"
    content_type = CONTENT_TYPE
    # The path says it streams; the body has no `stream` flag.
    always_streams = True

    def authorize(self, method: str, url: str, headers: dict[str, str], body: bytes) -> WireError | None:
        refusal = check_request(method, url, headers, body)
        return None if refusal is None else _error(refusal.status, refusal.error_type, refusal.message)

    def final_user_text(self, body: dict[str, Any]) -> str:
        # Converse blocks carry no `type`: `{"text": ...}`, `{"toolResult": ...}`.
        return untyped_text_of(last_user_content(body))

    def stream(self, turn: ScriptedTurn, request: dict[str, Any]) -> Iterator[EventFrame]:
        yield _event("messageStart", {"role": "assistant"})
        index = 0
        if turn.thinking:
            # Reasoning and text blocks have no start event; their first delta opens them.
            for piece in pieces(turn.thinking, turn.chunk_size):
                yield _delta(index, {"reasoningContent": {"text": piece}})
            yield _delta(index, {"reasoningContent": {"signature": scripted_signature(turn.thinking)}})
            yield _event("contentBlockStop", {"contentBlockIndex": index})
            index += 1
        if turn.text is not None:
            for piece in pieces(turn.text, turn.chunk_size) or [""]:
                yield _delta(index, {"text": piece})
            yield _event("contentBlockStop", {"contentBlockIndex": index})
            index += 1
        for call in turn.tool_calls:
            start = {"toolUse": {"toolUseId": call.id or _tool_use_id(), "name": call.name}}
            yield _event("contentBlockStart", {"contentBlockIndex": index, "start": start})
            for piece in pieces(compact_json(call.arguments), turn.chunk_size):
                yield _delta(index, {"toolUse": {"input": piece}})
            yield _event("contentBlockStop", {"contentBlockIndex": index})
            index += 1
        if turn.stream_exception is not None:
            message = STREAM_EXCEPTIONS.get(turn.stream_exception, "Scripted stream exception.")
            yield EventFrame(turn.stream_exception, {"message": message}, exception=True)
            return
        yield _event("messageStop", {"stopReason": _stop_reason(turn)})
        yield _event("metadata", {"usage": _usage(turn.usage), "metrics": {"latencyMs": 42}})

    def complete(self, turn: ScriptedTurn, request: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError("ConverseStream always streams")

    def overflow(self, request_tokens: int) -> WireError:
        return _error(400, "ValidationException", "Input is too long for requested model.")

    def failure(self, status: int) -> WireError:
        fallback = "InternalServerException" if status >= 500 else "ValidationException"
        error_type, message = _FAILURES.get(status, (fallback, f"Scripted failure (HTTP {status})."))
        return _error(status, error_type, message)

    def bad_request(self, message: str, status: int = 400) -> WireError:
        error_type = "ResourceNotFoundException" if status == 404 else "ValidationException"
        return _error(status, error_type, message)
