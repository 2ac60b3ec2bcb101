"""The result shape that pi's tool events carry (`tool_execution_update`/`_end`).

The events themselves are plain dicts in pi's wire vocabulary, built where they happen
(tempi/workflows/session/), because that is the form the event log stores and serves.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.messages import UserBlock


class ToolOutput(PiModel):
    """What a tool returns (pi's `AgentToolResult`): content for the model, details for UIs."""

    content: list[UserBlock] = Field(default_factory=list)
    details: Any = None
