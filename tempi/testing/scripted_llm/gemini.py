"""Gemini `generateContent` (`POST …/models/{model}:streamGenerateContent?alt=sse`): the wire
format of both the Gemini API and Vertex AI. Chunks are `GenerateContentResponse`s: parts with
text, thoughts (`thought: true`), function calls and `thoughtSignature`s, then `finishReason`
and `usageMetadata`; errors are Google's `{"error": {"code", "message", "status"}}`."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any

from tempi.testing.scripted_llm.scenario import ScriptedTurn, ScriptedUsage
from tempi.testing.scripted_llm.wire import (
    ApiName,
    SseEvent,
    WireError,
    last_user_content,
    messages_of,
    new_hex,
    pieces,
    untyped_text_of,
)

CONTEXT_WINDOW = 1_048_576

# (status, message) as Google sends them for each HTTP status a scenario may inject.
_STATUSES: dict[int, tuple[str, str]] = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: (
        "UNAUTHENTICATED",
        "Request had invalid authentication credentials. Expected OAuth 2 access token, "
        "login cookie or other valid authentication credential.",
    ),
    403: ("PERMISSION_DENIED", "Permission denied: Consumer has been suspended."),
    404: ("NOT_FOUND", "Requested entity was not found."),
    429: ("RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
    500: ("INTERNAL", "An internal error has occurred. Please retry or report the problem."),
    503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
    504: ("DEADLINE_EXCEEDED", "Deadline expired before operation could complete."),
}


def google_error(status: int, message: str, code: str) -> WireError:
    return WireError(status=status, body={"error": {"code": status, "message": message, "status": code}})


def thought_signature(seed: str) -> str:
    """Standard base64 with `+`, `/` and padding, so a client that re-encodes it (URL-safe,
    unpadded) is caught; stable for the same seed, as a real signature is for the same thought."""
    return base64.b64encode(b"\xfb\xef\xbe" + hashlib.sha256(seed.encode()).digest()[:16]).decode()


def _finish_reason(turn: ScriptedTurn) -> str:
    # Gemini ends a turn with function calls with STOP too; the calls say it is tool use.
    return "MAX_TOKENS" if turn.stop_reason == "length" else "STOP"


def _usage(usage: ScriptedUsage, thinking: bool) -> dict[str, Any]:
    # Gemini counts cached tokens inside promptTokenCount and thoughts apart from candidates.
    thoughts = usage.output // 2 if thinking else 0
    prompt = usage.input + usage.cache_read
    metadata: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": usage.output - thoughts,
        "totalTokenCount": prompt + usage.output,
    }
    if thoughts:
        metadata["thoughtsTokenCount"] = thoughts
    if usage.cache_read:
        metadata["cachedContentTokenCount"] = usage.cache_read
    return metadata


def _parts(turn: ScriptedTurn) -> Iterator[dict[str, Any]]:
    """The parts of a turn, one per chunk, in the order Gemini streams them."""
    if turn.thinking:
        thought_pieces = pieces(turn.thinking, turn.chunk_size)
        for index, piece in enumerate(thought_pieces):
            part: dict[str, Any] = {"text": piece, "thought": True}
            if index == len(thought_pieces) - 1:
                part["thoughtSignature"] = thought_signature("thought:" + turn.thinking)
            yield part
    if turn.text:
        text_pieces = pieces(turn.text, turn.chunk_size)
        for index, piece in enumerate(text_pieces):
            part = {"text": piece}
            # Without function calls the signature rides on the answer's last part.
            if index == len(text_pieces) - 1 and turn.thinking and not turn.tool_calls:
                part["thoughtSignature"] = thought_signature("text:" + turn.text)
            yield part
    for index, call in enumerate(turn.tool_calls):
        function_call: dict[str, Any] = {"name": call.name, "args": call.arguments}
        if call.id:
            function_call["id"] = call.id
        part = {"functionCall": function_call}
        # Gemini signs the first function call of a step.
        if index == 0:
            part["thoughtSignature"] = thought_signature(f"call:{call.name}:{turn.thinking or ''}")
        yield part


class GeminiWire:
    def __init__(self, name: ApiName) -> None:
        self.name = name

    def assistant_turns(self, body: dict[str, Any]) -> int:
        return sum(1 for content in messages_of(body, "contents") if content.get("role") == "model")

    def final_user_text(self, body: dict[str, Any]) -> str:
        return untyped_text_of(last_user_content(body, "contents", "parts"))

    def stream(self, turn: ScriptedTurn, request: dict[str, Any]) -> Iterator[SseEvent]:
        response_id = new_hex(22)
        for part in _parts(turn):
            yield SseEvent(self._chunk(response_id, [part]))
        final = self._chunk(response_id, [], finish=_finish_reason(turn))
        final["usageMetadata"] = _usage(turn.usage, bool(turn.thinking))
        yield SseEvent(final)

    def complete(self, turn: ScriptedTurn, request: dict[str, Any]) -> dict[str, Any]:
        answer = self._chunk(new_hex(22), list(_parts(turn)), finish=_finish_reason(turn))
        answer["usageMetadata"] = _usage(turn.usage, bool(turn.thinking))
        return answer

    @staticmethod
    def _chunk(response_id: str, parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "modelVersion": "scripted-gemini", "responseId": response_id}

    def overflow(self, request_tokens: int) -> WireError:
        tokens = max(CONTEXT_WINDOW + 1, request_tokens)
        return google_error(
            400,
            f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({CONTEXT_WINDOW}).",
            "INVALID_ARGUMENT",
        )

    def failure(self, status: int) -> WireError:
        fallback = "INTERNAL" if status >= 500 else "FAILED_PRECONDITION"
        code, message = _STATUSES.get(status, (fallback, f"Scripted failure (HTTP {status})."))
        return google_error(status, message, code)

    def bad_request(self, message: str, status: int = 400) -> WireError:
        code, _ = _STATUSES.get(status, ("INVALID_ARGUMENT", ""))
        return google_error(status, message, code)
