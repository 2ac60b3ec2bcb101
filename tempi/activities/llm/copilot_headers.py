"""The per-request headers GitHub Copilot's API expects, as pi sends them."""

from __future__ import annotations

from tempi.agent.llm_context import LlmContext
from tempi.agent.messages import ImageContent

COPILOT_PROVIDER = "github-copilot"


def copilot_headers(context: LlmContext) -> dict[str, str]:
    """Who started the request (the person, or the agent following up a tool result) and,
    when images are sent, the vision flag without which Copilot refuses them."""
    last = context.messages[-1] if context.messages else None
    headers = {
        "X-Initiator": "agent" if last is not None and last.role != "user" else "user",
        "Openai-Intent": "conversation-edits",
    }
    if any(
        message.role in ("user", "toolResult")
        and not isinstance(message.content, str)
        and any(isinstance(part, ImageContent) for part in message.content)
        for message in context.messages
    ):
        headers["Copilot-Vision-Request"] = "true"
    return headers
