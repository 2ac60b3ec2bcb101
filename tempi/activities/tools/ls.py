"""ls: the entries of one directory."""

from __future__ import annotations

from typing import Any

from tempi.activities.tools.context import ToolContext, listing_outcome, text_outcome
from tempi.activities.tools.errors import ToolError
from tempi.activities.tools.names import escape_name
from tempi.activities.tools.paths import resolve_tool_path
from tempi.activities.tools.validation import whole_number
from tempi.agent.tool_specs import ToolOutcome
from tempi.agent.tools.ls import LS_DEFAULT_LIMIT


async def run_ls(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    display_path: str = args.get("path") or "."
    limit = whole_number(args.get("limit", LS_DEFAULT_LIMIT), "limit", "ls", args, minimum=1)
    backend = ctx.backend
    path = await resolve_tool_path(display_path, ctx.cwd, backend)
    info = await backend.stat(path)
    if info is None:
        raise ToolError(f"Path not found: {display_path}")
    if info.kind != "dir":
        raise ToolError(f"Not a directory: {display_path} (use read to see a file)")

    # Names that are not valid UTF-8 are shown with \xHH escapes, which the tools accept back.
    entries = sorted(
        ((escape_name(entry.name), entry.kind) for entry in await backend.list_dir(path)),
        key=lambda entry: (entry[0].lower(), entry[0]),
    )
    if not entries:
        return text_outcome("(empty directory)")
    names = [name + ("/" if kind == "dir" else "") for name, kind in entries[:limit]]
    if len(entries) <= limit:
        return listing_outcome(names, [], {})
    notice = f"{limit} entries limit reached ({len(entries)} in total). Use limit={limit * 2} for more"
    return listing_outcome(names, [notice], {"entryLimitReached": limit})
