"""What a tool call gets besides its arguments."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tempi.activities.tools.backend import ExecutionBackend
from tempi.activities.tools.local_backend import LocalBackend
from tempi.agent.events import ToolOutput
from tempi.agent.messages import TextContent
from tempi.agent.tool_specs import ALL_TOOLS, ToolOutcome


@dataclass
class ToolContext:
    cwd: str
    backend: ExecutionBackend = field(default_factory=LocalBackend)
    tool_call_id: str = ""
    # Partial results while a tool runs (bash output so far); each one replaces the last.
    on_update: Callable[[ToolOutput], None] | None = None
    abort: asyncio.Event | None = None
    # Where bash saves the full output of a command whose output was cut (default: temp dir).
    spill_dir: str | None = None
    # Where edit records what it wrote, to recognise its own retry (default: spill_dir, then temp dir).
    state_dir: str | None = None
    # Tools the session has enabled; calls to any other tool are refused.
    enabled_tools: tuple[str, ...] = ALL_TOOLS


def text_outcome(text: str, details: Any = None, is_error: bool = False) -> ToolOutcome:
    return ToolOutcome(content=[TextContent(text=text)], details=details, is_error=is_error)
