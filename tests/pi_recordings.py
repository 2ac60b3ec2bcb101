"""pi's recordings read back: a request it sent (`llm-requests/NAME.json`) and the
conversation of a session file of it (`sessions/NAME.jsonl`) as tempi messages."""

from __future__ import annotations

import json
from typing import Any

from tempi.agent.messages import AssistantMessage, LlmMessage, ToolResultMessage, UserMessage, parse_message
from tests.fixture_paths import PI_FIXTURES


def pi_request(name: str) -> dict[str, Any]:
    """What pi sent (method, path, headers, body...) as recorded under `name`."""
    recorded: dict[str, Any] = json.loads((PI_FIXTURES / "llm-requests" / f"{name}.json").read_text())
    return recorded


def pi_session(name: str) -> tuple[str, list[LlmMessage]]:
    """pi's session id and the messages it had when it sent its last tool-result turn (the
    final answer left out)."""
    session_id = ""
    messages: list[LlmMessage] = []
    for line in (PI_FIXTURES / "sessions" / f"{name}.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry.get("type") == "session":
            session_id = entry["id"]
        elif entry.get("type") == "message":
            message = parse_message(entry["message"])
            assert isinstance(message, (UserMessage, AssistantMessage, ToolResultMessage))
            messages.append(message)
    while not isinstance(messages[-1], ToolResultMessage):
        messages.pop()
    return session_id, messages


def pi_conversation(name: str) -> list[LlmMessage]:
    return pi_session(name)[1]
