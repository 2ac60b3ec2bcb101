"""find: list files (and directories) whose names match a glob."""

from __future__ import annotations

import asyncio
import posixpath
from dataclasses import dataclass, field
from typing import Any

from tempi.activities.tools.backend import ToolUnavailableError
from tempi.activities.tools.context import ToolContext, listing_outcome, text_outcome
from tempi.activities.tools.errors import ToolError
from tempi.activities.tools.glob_match import GlobMatcher
from tempi.activities.tools.grep import NOT_GIT_DIR, RG_COMMON_ARGS, linked_stop
from tempi.activities.tools.names import decode_name, escape_name
from tempi.activities.tools.paths import relative_to, resolve_tool_path
from tempi.activities.tools.validation import whole_number
from tempi.agent.tool_specs import ToolOutcome
from tempi.agent.tools.find import FIND_DEFAULT_LIMIT


@dataclass
class _FileCollector:
    """Matches the file list `rg --files` streams (which already honours .gitignore and
    skips .git); directories are derived from the files' parents."""

    root: str
    matcher: GlobMatcher
    wanted: int  # one more than the limit, to know whether the limit cut anything
    stop: asyncio.Event
    found: list[str] = field(default_factory=list)
    _seen_dirs: set[str] = field(default_factory=set)
    _pending: bytes = b""

    def feed(self, chunk: bytes) -> None:
        *complete, self._pending = (self._pending + chunk).split(b"\n")
        for raw in complete:
            if raw and not self.stop.is_set():
                self._add(relative_to(decode_name(raw), self.root))

    def _add(self, relative: str) -> None:
        parent = posixpath.dirname(relative)
        new_dirs: list[str] = []
        while parent and parent not in self._seen_dirs:
            self._seen_dirs.add(parent)
            new_dirs.append(parent)
            parent = posixpath.dirname(parent)
        for directory in reversed(new_dirs):
            if self.matcher.matches(directory, is_dir=True):
                self._found(directory + "/")
        if self.matcher.matches(relative):
            self._found(relative)

    def _found(self, entry: str) -> None:
        if len(self.found) < self.wanted:
            self.found.append(entry)
        if len(self.found) >= self.wanted:
            self.stop.set()


async def run_find(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    pattern: str = args["pattern"]
    display_path: str = args.get("path") or "."
    limit = whole_number(args.get("limit", FIND_DEFAULT_LIMIT), "limit", "find", args, minimum=1)
    try:
        matcher = GlobMatcher.compile(pattern)
    except ValueError as error:
        raise ToolError(str(error)) from None
    backend = ctx.backend
    root = await resolve_tool_path(display_path, ctx.cwd, backend)
    info = await backend.stat(root)
    if info is None:
        raise ToolError(f"Path not found: {display_path}")
    if info.kind != "dir":
        raise ToolError(f"Not a directory: {display_path}")
    try:
        rg = backend.ripgrep_argv()
    except ToolUnavailableError as error:
        raise ToolError(str(error)) from None

    argv = [*rg, "--files", *RG_COMMON_ARGS, "--glob", NOT_GIT_DIR, "--", root]
    async with linked_stop(ctx.abort) as stop:
        collector = _FileCollector(escape_name(root), matcher, limit + 1, stop)
        result = await backend.exec(argv, cwd=root, on_output=collector.feed, abort=stop, merge_stderr=False)
    if ctx.abort is not None and ctx.abort.is_set():
        raise ToolError("Search aborted")
    if result.exit_code not in (0, 1, None) and not collector.found:
        stderr = result.stderr.decode("utf-8", errors="replace").strip()
        raise ToolError(stderr or f"ripgrep failed with exit code {result.exit_code}")
    if not collector.found:
        return text_outcome(f"No files found matching {pattern}")

    limit_reached = len(collector.found) > limit
    entries = sorted(collector.found)[:limit]
    if not limit_reached:
        return listing_outcome(entries, [], {})
    notice = f"{limit} results limit reached. Use limit={limit * 2} for more, or narrow the pattern"
    return listing_outcome(entries, [notice], {"resultLimitReached": limit})
