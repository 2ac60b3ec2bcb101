"""grep: search file contents with ripgrep."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import posixpath
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from tempi.activities.tools.backend import ToolUnavailableError
from tempi.activities.tools.context import ToolContext, listing_outcome, text_outcome
from tempi.activities.tools.errors import ToolError
from tempi.activities.tools.names import decode_name, escape_name
from tempi.activities.tools.paths import relative_to, resolve_tool_path
from tempi.activities.tools.validation import whole_number
from tempi.agent.tool_specs import ToolOutcome
from tempi.agent.tools.grep import GREP_DEFAULT_LIMIT
from tempi.agent.truncation import (
    GREP_MAX_LINE_CHARS,
    truncate_line,
)

# Paths everywhere under the search root, hidden ones included, except git's own store.
RG_COMMON_ARGS = ("--hidden", "--no-require-git", "--sort", "path", "--color=never")
NOT_GIT_DIR = "!.git"


def rg_text(value: dict[str, Any] | None) -> str:
    """ripgrep's JSON carries non-UTF-8 data as base64 `bytes`."""
    if not value:
        return ""
    if "text" in value:
        return str(value["text"])
    return base64.b64decode(value.get("bytes", "")).decode("utf-8", errors="replace")


def rg_path(value: dict[str, Any] | None) -> str:
    """A path from ripgrep's JSON; one that is not valid UTF-8 gets \\xHH escapes."""
    if value and "text" not in value:
        return decode_name(base64.b64decode(value.get("bytes", "")))
    return rg_text(value)


@contextlib.asynccontextmanager
async def linked_stop(abort: asyncio.Event | None) -> AsyncIterator[asyncio.Event]:
    """An event the tool sets to stop its process early, also set when the call is aborted."""
    stop = asyncio.Event()
    watcher = asyncio.create_task(abort.wait()) if abort is not None else None
    if watcher is not None:
        watcher.add_done_callback(lambda _: stop.set())
    try:
        yield stop
    finally:
        if watcher is not None:
            watcher.cancel()


@dataclass
class _MatchCollector:
    """Turns ripgrep's JSON stream into output lines, stopping after `limit` matches
    (plus the trailing context of the last one)."""

    limit: int
    context: int
    format_path: Callable[[str], str]
    stop: asyncio.Event
    lines: list[str] = field(default_factory=list)
    matches: int = 0
    limit_reached: bool = False
    lines_truncated: bool = False
    _pending: bytearray = field(default_factory=bytearray)
    _last_match: tuple[str, int] | None = None

    def feed(self, chunk: bytes) -> None:
        self._pending.extend(chunk)
        *complete, rest = self._pending.split(b"\n")
        self._pending = bytearray(rest)
        for raw in complete:
            if self.stop.is_set():
                return
            try:
                event = json.loads(raw)
            except ValueError:
                continue  # blank or garbled line: nothing to show
            self._handle(event)

    def _handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind not in ("match", "context"):
            if kind == "end" and self.limit_reached:
                self.stop.set()
            return
        data = event["data"]
        path = rg_path(data.get("path"))
        number = int(data.get("line_number") or 0)
        if self.limit_reached:
            # Only the context lines after the last allowed match are still wanted.
            assert self._last_match is not None
            last_path, last_number = self._last_match
            if kind == "match" or path != last_path or number > last_number + self.context:
                self.stop.set()
                return
        text = rg_text(data.get("lines")).rstrip("\n").rstrip("\r")
        text, cut = truncate_line(text, GREP_MAX_LINE_CHARS)
        self.lines_truncated |= cut
        shown_path = self.format_path(path)
        if kind == "match":
            self.matches += 1
            self.lines.append(f"{shown_path}:{number}: {text}")
            if self.matches >= self.limit:
                self.limit_reached = True
                self._last_match = (path, number)
                if self.context == 0:
                    self.stop.set()
        else:
            self.lines.append(f"{shown_path}-{number}- {text}")


async def run_grep(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    pattern: str = args["pattern"]
    display_path: str = args.get("path") or "."
    limit = whole_number(args.get("limit", GREP_DEFAULT_LIMIT), "limit", "grep", args, minimum=1)
    context = whole_number(args.get("context", 0), "context", "grep", args, minimum=0)
    backend = ctx.backend
    root = await resolve_tool_path(display_path, ctx.cwd, backend)
    info = await backend.stat(root)
    if info is None:
        raise ToolError(f"Path not found: {display_path}")
    try:
        rg = backend.ripgrep_argv()
    except ToolUnavailableError as error:
        raise ToolError(str(error)) from None

    argv = [*rg, "--json", "--line-number", *RG_COMMON_ARGS]
    if args.get("ignoreCase"):
        argv.append("--ignore-case")
    if args.get("literal"):
        argv.append("--fixed-strings")
    if context:
        argv += ["--context", str(context)]
    if args.get("glob"):
        argv += ["--glob", args["glob"]]
    # -e keeps a pattern such as "-v" or "--pre=x" a pattern; -- keeps the path a path.
    argv += ["--glob", NOT_GIT_DIR, "-e", pattern, "--", root]

    shown_root = escape_name(root)

    def format_path(path: str) -> str:
        return relative_to(path, shown_root) if info.kind == "dir" else posixpath.basename(path)

    async with linked_stop(ctx.abort) as stop:
        collector = _MatchCollector(limit, context, format_path, stop)
        result = await backend.exec(
            argv,
            cwd=root if info.kind == "dir" else posixpath.dirname(root),
            on_output=collector.feed,
            abort=stop,
            merge_stderr=False,
        )
    if ctx.abort is not None and ctx.abort.is_set():
        raise ToolError("Search aborted")

    stderr = result.stderr.decode("utf-8", errors="replace").strip()
    if result.exit_code not in (0, 1, None) and not collector.matches:
        raise ToolError(stderr or f"ripgrep failed with exit code {result.exit_code}")
    if not collector.matches:
        return text_outcome("No matches found")

    details: dict[str, Any] = {}
    notices: list[str] = []
    after: list[str] = []
    if collector.limit_reached:
        notices.append(
            f"{limit} matches limit reached. Use limit={limit * 2} for more, or narrow the pattern"
        )
        details["matchLimitReached"] = limit
    if collector.lines_truncated:
        after.append(f"Some lines were cut to {GREP_MAX_LINE_CHARS} characters; use read to see them whole")
        details["linesTruncated"] = True
    if result.exit_code not in (0, 1, None) and stderr:
        after.append(f"Some files could not be searched: {stderr.splitlines()[0]}")
    return listing_outcome(collector.lines, notices, details, after=after)
