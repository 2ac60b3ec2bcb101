"""The answers a faux model can be scripted to give. Kept apart from the provider in
`faux.py` so scripts (tests, the `faux/demo` model) can build answers without
importing the provider that plays them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from tempi.agent.llm_context import LlmContext
from tempi.agent.messages import StopReason


class FauxToolCall(BaseModel):
    name: str
    # A string is sent as-is, so a test can stream JSON that does not parse.
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class FauxUsage(BaseModel):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0


class FauxResponse(BaseModel):
    text: str | None = None
    thinking: str | None = None
    tool_calls: list[FauxToolCall] = Field(default_factory=list)
    # Default: "toolUse" when there are tool calls, else "stop". "error" ends with an error event.
    stop_reason: StopReason | None = None
    error_message: str | None = None
    # Default: a rough estimate (4 characters per token) of the context and the answer.
    usage: FauxUsage | None = None
    delay_ms: float = Field(default=0, ge=0)


FauxScript = FauxResponse | Callable[[LlmContext], FauxResponse]
