"""What one LLM call is given: system prompt, conversation and tool definitions."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.messages import AssistantMessage, ToolResultMessage, UserMessage


class ToolSpec(PiModel):
    """A tool as the model sees it. `parameters` is a JSON schema object."""

    name: str
    description: str
    parameters: dict[str, Any]


class LlmContext(PiModel):
    system_prompt: str = ""
    messages: list[UserMessage | AssistantMessage | ToolResultMessage] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
