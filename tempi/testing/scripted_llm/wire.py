"""What every provider wire protocol offers the server, plus small shared helpers."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

from tempi.testing.scripted_llm.scenario import ScriptedTurn

ApiName = Literal[
    "openai-completions",
    "openai-responses",
    "anthropic-messages",
    "azure-openai-responses",
    "openai-codex-responses",
    "mistral-conversations",
    "google-generative-ai",
    "google-vertex",
    "bedrock-converse-stream",
]
API_NAMES: tuple[ApiName, ...] = get_args(ApiName)


@dataclass(frozen=True)
class SseEvent:
    data: dict[str, Any] | str
    event: str | None = None

    def encode(self) -> bytes:
        payload = self.data if isinstance(self.data, str) else compact_json(self.data)
        head = f"event: {self.event}\n" if self.event else ""
        return f"{head}data: {payload}\n\n".encode()


class StreamChunk(Protocol):
    def encode(self) -> bytes: ...


@dataclass(frozen=True)
class WireError:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class WireApi(Protocol):
    """A wire format. One may also have `content_type` (of its stream; SSE otherwise),
    `always_streams` (its path streams whatever the body says) and
    `authorize(method, url, headers, body) -> WireError | None` (checked before anything else)."""

    name: ApiName

    def assistant_turns(self, body: dict[str, Any]) -> int:
        """How many assistant turns the conversation in the request already holds."""
        ...

    def final_user_text(self, body: dict[str, Any]) -> str:
        """The text of the request's last message when the user sent it, else ''."""
        ...

    def stream(self, turn: ScriptedTurn, request: dict[str, Any]) -> Iterator[StreamChunk]:
        """The stream chunks (SSE events, event-stream frames) that answer `request` with `turn`."""
        ...

    def complete(self, turn: ScriptedTurn, request: dict[str, Any]) -> dict[str, Any]:
        """The non-streaming JSON answer for the same turn."""
        ...

    def overflow(self, request_tokens: int) -> WireError: ...

    def failure(self, status: int) -> WireError: ...

    def bad_request(self, message: str, status: int = 400) -> WireError: ...


def compact_json(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A scripted lone surrogate (a hostile model's "\udcff") can only travel escaped.
        return json.dumps(value, separators=(",", ":"))
    return text


def new_hex(length: int) -> str:
    return secrets.token_hex((length + 1) // 2)[:length]


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def text_of(content: Any, part_types: tuple[str, ...]) -> str:
    """Text of a message `content` that is a string or a list of typed parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in part_types
        )
    return ""


def model_of(request: dict[str, Any]) -> str:
    model = request.get("model")
    return model if isinstance(model, str) and model else "scripted-model"


def messages_of(body: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = body.get(key)
    if not isinstance(items, list):
        return []
    return [item for item in items if isinstance(item, dict)]


def last_user_content(body: dict[str, Any], key: str = "messages", field: str = "content") -> Any:
    """The `field` of the request's last message when the user sent it, else None."""
    messages = messages_of(body, key)
    if not messages or messages[-1].get("role") != "user":
        return None
    return messages[-1].get(field)


def untyped_text_of(parts: Any) -> str:
    """Text of a list of parts that carry no `type` (Bedrock's blocks, Gemini's parts)."""
    if not isinstance(parts, list):
        return ""
    return "".join(str(part.get("text", "")) for part in parts if isinstance(part, dict))


def scripted_signature(thinking: str) -> str:
    # Real signatures are opaque base64; a digest keeps ours stable for the same thinking.
    return base64.b64encode(b"scripted:" + hashlib.sha256(thinking.encode()).digest()).decode()


class RoleMessagesWire:
    """Turn counting for a request whose `messages` carry roles and typed text parts."""

    def assistant_turns(self, body: dict[str, Any]) -> int:
        return sum(1 for message in messages_of(body, "messages") if message.get("role") == "assistant")

    def final_user_text(self, body: dict[str, Any]) -> str:
        return text_of(last_user_content(body), ("text",))
