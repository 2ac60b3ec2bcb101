"""write: replace a file's content, creating parent directories."""

from __future__ import annotations

from typing import Any

from tempi.activities.tools.context import ToolContext, text_outcome
from tempi.activities.tools.errors import ToolError
from tempi.activities.tools.locks import path_lock
from tempi.activities.tools.paths import resolve_tool_path
from tempi.agent.tool_specs import ToolOutcome


async def run_write(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    display_path: str = args["path"]
    data = args["content"].encode("utf-8")
    path = await resolve_tool_path(display_path, ctx.cwd, ctx.backend)
    info = await ctx.backend.stat(path)
    if info is not None and info.kind == "dir":
        raise ToolError(f"{display_path} is a directory; give the path of a file to write")
    async with path_lock(path):
        await ctx.backend.write_bytes(path, data)
    return text_outcome(f"Wrote {len(data)} bytes to {display_path}")
