"""What a tool call gets besides its arguments."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tempi.activities.tools.backend import ExecutionBackend
from tempi.activities.tools.local_backend import LocalBackend
from tempi.agent.events import ToolOutput
from tempi.agent.messages import TextContent
from tempi.agent.tool_specs import TOOL_DEFINITIONS, ToolOutcome
from tempi.agent.truncation import DEFAULT_MAX_BYTES, format_size, truncate_head


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
    enabled_tools: tuple[str, ...] = tuple(TOOL_DEFINITIONS)
    # settings.json's shellCommandPrefix: run before every bash tool command, as in pi.
    command_prefix: str | None = None
    # When tools act in a container: the host folder mounted at `cwd` there, so a file
    # `attach` names can be found on the host by the front end that uploads it.
    host_cwd: str | None = None


def text_outcome(text: str, details: Any = None, is_error: bool = False) -> ToolOutcome:
    return ToolOutcome(content=[TextContent(text=text)], details=details, is_error=is_error)


def listing_outcome(
    lines: Sequence[str], notices: Sequence[str], details: dict[str, Any], *, after: Sequence[str] = ()
) -> ToolOutcome:
    """Result lines cut to the output byte limit, with bracketed notices: `notices` (a
    result limit reached), then the cut, then `after`."""
    truncation = truncate_head("\n".join(lines), max_lines=len(lines) + 1)
    all_notices = list(notices)
    details = dict(details)
    if truncation.truncated:
        all_notices.append(f"{format_size(DEFAULT_MAX_BYTES)} output limit reached")
        details["truncation"] = truncation.to_json_dict()
    all_notices += after
    text = truncation.content
    if all_notices:
        text += f"\n\n[{'. '.join(all_notices)}]"
    return text_outcome(text, details or None)
