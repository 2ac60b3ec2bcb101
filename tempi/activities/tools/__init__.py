"""The seven coding tools as plain async functions over an execution backend.

`execute_tool` is the single entry point: it prepares and validates arguments as the
tool's definition (`tempi.agent.tool_specs`) says, runs the tool's implementation, and
turns every failure the model can act on into an error outcome. It never raises,
except `asyncio.CancelledError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tempi.activities.tools.attach import run_attach
from tempi.activities.tools.backend import (
    DirEntry,
    ExecResult,
    ExecutionBackend,
    FileStat,
    ToolUnavailableError,
)
from tempi.activities.tools.bash import run_bash
from tempi.activities.tools.context import ToolContext, text_outcome
from tempi.activities.tools.edit import run_edit
from tempi.activities.tools.errors import ToolError, describe_os_error
from tempi.activities.tools.find import run_find
from tempi.activities.tools.grep import run_grep
from tempi.activities.tools.invalid_call import invalid_arguments_reason
from tempi.activities.tools.local_backend import LocalBackend
from tempi.activities.tools.locks import path_lock
from tempi.activities.tools.ls import run_ls
from tempi.activities.tools.read import run_read
from tempi.activities.tools.validation import validate_args
from tempi.activities.tools.write import run_write
from tempi.agent.tool_specs import TOOL_DEFINITIONS, ToolOutcome

__all__ = [
    "TOOL_IMPLEMENTATIONS",
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


ToolRun = Callable[[dict[str, Any], ToolContext], Awaitable[ToolOutcome]]

# One implementation per defined tool; tests/test_tools_args.py checks the two tables agree.
TOOL_IMPLEMENTATIONS: dict[str, ToolRun] = {
    "read": run_read,
    "bash": run_bash,
    "edit": run_edit,
    "write": run_write,
    "grep": run_grep,
    "find": run_find,
    "ls": run_ls,
    "attach": run_attach,
}


async def execute_tool(name: str, args: Any, ctx: ToolContext) -> ToolOutcome:
    """Run one tool call; failures come back as `is_error` outcomes."""
    run = TOOL_IMPLEMENTATIONS.get(name)
    definition = TOOL_DEFINITIONS.get(name)
    if run is None or definition is None or name not in ctx.enabled_tools:
        available = ", ".join(ctx.enabled_tools) or "none"
        return _failed(f'Tool "{name}" is not available. Available tools: {available}.')
    if ctx.abort is not None and ctx.abort.is_set():
        return _failed("Aborted before the tool ran")
    if (reason := invalid_arguments_reason(args)) is not None:
        return _failed(reason)
    try:
        checked = validate_args(definition.spec, definition.prepare_args(args))
        return await run(checked, ctx)
    except ToolError as error:
        return _failed(str(error))
    except OSError as error:
        path = args.get("path") if isinstance(args, dict) else None
        shown = path if isinstance(path, str) and path else str(error.filename or ctx.cwd)
        return _failed(describe_os_error(error, shown))
    except asyncio.CancelledError:
        raise
    except Exception as error:
        # A bug in a tool must not take the agent down; the model can still work around it.
        return _failed(f"Internal error in the {name} tool: {type(error).__name__}: {error}")


def _failed(text: str) -> ToolOutcome:
    # pi's result for a tool that threw: the message and an empty details object.
    return text_outcome(text, {}, is_error=True)
