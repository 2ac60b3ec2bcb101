"""edit: exact-text replacements in one file, all or nothing."""

from __future__ import annotations

from typing import Any

from tempi.activities.tools.context import ToolContext, text_outcome
from tempi.activities.tools.edit_diff import render_diff
from tempi.activities.tools.edit_journal import (
    EditRecord,
    content_hash,
    journal_dir,
    load_record,
    store_record,
)
from tempi.activities.tools.edit_match import Edit, apply_edits, to_lf
from tempi.activities.tools.errors import ToolError
from tempi.activities.tools.locks import path_lock
from tempi.activities.tools.paths import resolve_tool_path
from tempi.agent.tool_specs import ToolOutcome

_BOM = "\ufeff"


async def run_edit(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    display_path: str = args["path"]
    edits = [Edit(item["oldText"], item["newText"]) for item in args["edits"]]
    if not edits:
        raise ToolError("edits is empty; give at least one {oldText, newText} replacement")
    backend = ctx.backend
    path = await resolve_tool_path(display_path, ctx.cwd, backend)
    info = await backend.stat(path)
    if info is None:
        raise ToolError(f"File not found: {display_path}. Use write to create a new file.")
    if info.kind == "dir":
        raise ToolError(f"{display_path} is a directory, not a file")
    journal = journal_dir(ctx.state_dir, ctx.spill_dir)

    async with path_lock(path):
        raw = await backend.read_bytes(path)
        if ctx.tool_call_id:
            record = await load_record(journal, ctx.tool_call_id, path)
            if record is not None and record.post_edit_sha256 == content_hash(raw):
                return text_outcome(record.text, record.details)
        if b"\0" in raw:
            raise ToolError(f"{display_path} looks like a binary file; edit it with bash instead")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(
                f"{display_path} is not valid UTF-8 text, so edit cannot change it safely; use bash instead"
            ) from None
        bom = _BOM if text.startswith(_BOM) else ""
        body = text[len(bom) :]
        new_body = apply_edits(body, edits, display_path)
        if new_body == body:
            raise ToolError(
                f"No changes made to {display_path}: the replacements give the same content as before."
            )
        diff = render_diff(to_lf(body), to_lf(new_body))
        details: dict[str, Any] = {"diff": diff.diff}
        if diff.first_changed_line is not None:
            details["firstChangedLine"] = diff.first_changed_line
        message = f"Replaced {len(edits)} block(s) in {display_path}."
        new_raw = (bom + new_body).encode("utf-8")
        if ctx.tool_call_id:
            record = EditRecord(
                path=path, post_edit_sha256=content_hash(new_raw), text=message, details=details
            )
            await store_record(journal, ctx.tool_call_id, record)
        await backend.write_bytes(path, new_raw)
    return text_outcome(message, details)
