"""Events a provider emits while it streams one assistant message (pi's `AssistantMessageEvent`).

Every event carries `partial`, the message as it stands after the event.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.messages import AssistantMessage, ToolCall


class _Indexed(PiModel):
    content_index: int
    partial: AssistantMessage


class StartEvent(PiModel):
    type: Literal["start"] = "start"
    partial: AssistantMessage


class TextStart(_Indexed):
    type: Literal["text_start"] = "text_start"


class TextDelta(_Indexed):
    type: Literal["text_delta"] = "text_delta"
    delta: str


class TextEnd(_Indexed):
    type: Literal["text_end"] = "text_end"
    content: str


class ThinkingStart(_Indexed):
    type: Literal["thinking_start"] = "thinking_start"


class ThinkingDelta(_Indexed):
    type: Literal["thinking_delta"] = "thinking_delta"
    delta: str


class ThinkingEnd(_Indexed):
    type: Literal["thinking_end"] = "thinking_end"
    content: str


class ToolCallStart(_Indexed):
    type: Literal["toolcall_start"] = "toolcall_start"


class ToolCallDelta(_Indexed):
    type: Literal["toolcall_delta"] = "toolcall_delta"
    delta: str


class ToolCallEnd(_Indexed):
    type: Literal["toolcall_end"] = "toolcall_end"
    tool_call: ToolCall


class DoneEvent(PiModel):
    type: Literal["done"] = "done"
    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage


class ErrorEvent(PiModel):
    type: Literal["error"] = "error"
    reason: Literal["error", "aborted"]
    error: AssistantMessage


AssistantMessageEvent = Annotated[
    StartEvent
    | TextStart
    | TextDelta
    | TextEnd
    | ThinkingStart
    | ThinkingDelta
    | ThinkingEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | DoneEvent
    | ErrorEvent,
    Field(discriminator="type"),
]
