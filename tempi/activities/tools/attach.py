"""attach: check the file a model wants to share and name it for the front end that uploads it."""

from __future__ import annotations

import os
import posixpath
from typing import Any

from tempi.activities.tools.context import ToolContext, text_outcome
from tempi.activities.tools.errors import ToolError
from tempi.activities.tools.paths import resolve_tool_path
from tempi.agent.tool_specs import ToolOutcome


def _inside(path: str, root: str) -> bool:
    root = posixpath.normpath(root)
    return posixpath.normpath(path) == root or posixpath.normpath(path).startswith(root.rstrip("/") + "/")


async def run_attach(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    shown: str = args["path"]
    path = await resolve_tool_path(shown, ctx.cwd, ctx.backend)
    if not _inside(path, ctx.cwd):
        raise ToolError(f"Cannot share {shown}: only files inside {ctx.cwd} can be shared")
    info = await ctx.backend.stat(path)
    if info is None:
        raise ToolError(f"File not found: {shown}")
    if info.kind != "file":
        raise ToolError(f"Not a file: {shown} (share one file at a time)")
    title = str(args.get("title") or "").strip() or posixpath.basename(path)
    if ctx.host_cwd is not None:
        # The uploader reads the host side of the mount.
        path = os.path.join(ctx.host_cwd, posixpath.relpath(path, ctx.cwd))
    return text_outcome(f"Attached file: {title}", details={"path": path, "title": title})
