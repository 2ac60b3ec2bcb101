"""The seven coding tools as plain async functions over an execution backend.

`execute_tool` is the single entry point: it validates arguments against the tool's
spec, runs the tool, and turns every failure the model can act on into an error
outcome. It never raises, except `asyncio.CancelledError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tempi.activities.tools.backend import (
    DirEntry,
    ExecResult,
    ExecutionBackend,
    FileStat,
    ToolUnavailableError,
)
from tempi.activities.tools.bash import run_bash
from tempi.activities.tools.context import ToolContext, text_outcome
from tempi.activities.tools.edit import prepare_edit_args, run_edit
from tempi.activities.tools.errors import ToolError, describe_os_error
from tempi.activities.tools.find import run_find
from tempi.activities.tools.grep import run_grep
from tempi.activities.tools.local_backend import LocalBackend
from tempi.activities.tools.locks import path_lock
from tempi.activities.tools.ls import run_ls
from tempi.activities.tools.read import run_read
from tempi.activities.tools.validation import validate_args
from tempi.activities.tools.write import run_write
from tempi.agent.tool_specs import ALL_TOOLS, ToolOutcome, tool_specs

__all__ = [
    "DirEntry",
    "ExecResult",
    "ExecutionBackend",
    "FileStat",
    "LocalBackend",
    "ToolContext",
    "ToolOutcome",
    "ToolUnavailableError",
    "execute_tool",
    "path_lock",
]


def _unchanged(args: Any) -> Any:
    return args


@dataclass(frozen=True)
class _Tool:
    run: Callable[[dict[str, Any], ToolContext], Awaitable[ToolOutcome]]
    prepare_args: Callable[[Any], Any] = _unchanged


_TOOLS: dict[str, _Tool] = {
    "read": _Tool(run_read),
    "bash": _Tool(run_bash),
    "edit": _Tool(run_edit, prepare_edit_args),
    "write": _Tool(run_write),
    "grep": _Tool(run_grep),
    "find": _Tool(run_find),
    "ls": _Tool(run_ls),
}
assert set(_TOOLS) == set(ALL_TOOLS)
_SPECS = {spec.name: spec for spec in tool_specs(ALL_TOOLS)}


async def execute_tool(name: str, args: Any, ctx: ToolContext) -> ToolOutcome:
    """Run one tool call; failures come back as `is_error` outcomes."""
    tool = _TOOLS.get(name)
    if tool is None or name not in ctx.enabled_tools:
        available = ", ".join(ctx.enabled_tools) or "none"
        return text_outcome(f'Tool "{name}" is not available. Available tools: {available}.', is_error=True)
    if ctx.abort is not None and ctx.abort.is_set():
        return text_outcome("Aborted before the tool ran", is_error=True)
    try:
        checked = validate_args(_SPECS[name], tool.prepare_args(args))
        return await tool.run(checked, ctx)
    except ToolError as error:
        return text_outcome(str(error), is_error=True)
    except OSError as error:
        path = args.get("path") if isinstance(args, dict) else None
        shown = path if isinstance(path, str) and path else str(error.filename or ctx.cwd)
        return text_outcome(describe_os_error(error, shown), is_error=True)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        # A bug in a tool must not take the agent down; the model can still work around it.
        return text_outcome(
            f"Internal error in the {name} tool: {type(error).__name__}: {error}", is_error=True
        )
