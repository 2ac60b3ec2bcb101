"""Pieces of the chat-completions message format that OpenAI's Chat Completions API and
Mistral's share. Free of any SDK, so Mistral's plain-httpx client imports no `openai`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tempi.agent.messages import ImageContent, TextContent, ToolCall, UserMessage


def compact_json(value: Any) -> str:
    """JSON as pi's SDKs send tool arguments: no spaces, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def chat_tool_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": compact_json(call.arguments)},
    }


def chat_user_content(
    message: UserMessage, image_part: Callable[[ImageContent], dict[str, Any]]
) -> str | list[dict[str, Any]]:
    """A user message's content: its string, or text parts and `image_part`s in order."""
    if isinstance(message.content, str):
        return message.content
    return [
        {"type": "text", "text": block.text} if isinstance(block, TextContent) else image_part(block)
        for block in message.content
    ]
