"""read: a page of a text file, or an image."""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from tempi.activities.tools.context import ToolContext, text_outcome
from tempi.activities.tools.errors import ToolError
from tempi.activities.tools.images import detect_image_mime, prepare_image
from tempi.activities.tools.paths import resolve_tool_path
from tempi.activities.tools.validation import whole_number
from tempi.agent.messages import ImageContent, TextContent
from tempi.agent.tool_specs import ToolOutcome
from tempi.agent.truncation import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head, utf8_len

MAX_IMAGE_BYTES = 64 * 1024 * 1024
_SNIFF_BYTES = 8192


def looks_binary(head: bytes) -> bool:
    """NUL bytes, or mostly undecodable as UTF-8 (a few stray bytes in a text file are fine)."""
    if b"\0" in head:
        return True
    sample = head[:_SNIFF_BYTES]
    bad = sample.decode("utf-8", errors="replace").count("\ufffd") - sample.decode(
        "utf-8", errors="ignore"
    ).count("\ufffd")
    return bad > 4 and bad * 10 > len(sample)


def binary_file_message(display_path: str) -> str:
    return (
        f"{display_path} looks like a binary file, so it is not shown as text. "
        f"Inspect it with bash instead (for example: file {display_path}; xxd {display_path} | head)."
    )


@dataclass
class _Page:
    """The lines of a file from `start` (0-based), up to `limit`, collected while streaming
    the file. Only as much is kept as head truncation can show, so huge files stay cheap."""

    start: int
    limit: int | None
    total_lines: int = 0
    selected_lines: int = 0
    selected_bytes: int = 0
    first_selected_line_bytes: int = 0
    kept: list[str] = field(default_factory=list)
    kept_bytes: int = 0
    _current: list[str] = field(default_factory=list)
    _current_bytes: int = 0
    _keep_current: bool | None = None  # decided when a selected line starts

    def _selected(self, index: int) -> bool:
        return index >= self.start and (self.limit is None or index < self.start + self.limit)

    def _room_left(self) -> bool:
        # One line or byte past the limits is enough for truncation to see it must cut.
        return len(self.kept) <= DEFAULT_MAX_LINES and self.kept_bytes <= DEFAULT_MAX_BYTES

    def feed(self, text: str) -> None:
        pieces = text.split("\n")
        for position, piece in enumerate(pieces):
            if self._selected(self.total_lines):
                size = utf8_len(piece)
                self._current_bytes += size
                self.selected_bytes += size
                if self._keep_current is None:
                    self._keep_current = self._room_left()
                if self._keep_current and self.kept_bytes <= DEFAULT_MAX_BYTES:
                    self._current.append(piece)
                    self.kept_bytes += size
            if position < len(pieces) - 1:
                self._end_line()

    def _end_line(self) -> None:
        if self._selected(self.total_lines):
            if self.selected_lines == 0:
                self.first_selected_line_bytes = self._current_bytes
            else:
                self.selected_bytes += 1  # the newline joining it to the previous line
            self.selected_lines += 1
            if self._keep_current:
                self.kept.append("".join(self._current))
                self.kept_bytes += 1
        self._current = []
        self._current_bytes = 0
        self._keep_current = None
        self.total_lines += 1

    def finish(self) -> None:
        self._end_line()  # the text after the last newline is a line too (maybe empty)


async def _chunks_with_first(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for chunk in rest:
        yield chunk


async def _read_page(chunks: AsyncIterator[bytes], start: int, limit: int | None, display_path: str) -> _Page:
    page = _Page(start, limit)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    async for chunk in chunks:
        if b"\0" in chunk:
            raise ToolError(binary_file_message(display_path))
        page.feed(decoder.decode(chunk))
    page.feed(decoder.decode(b"", final=True))
    page.finish()
    return page


def _format_page(page: _Page, display_path: str) -> tuple[str, Any]:
    truncation = truncate_head("\n".join(page.kept))
    truncation = truncation.model_copy(
        update={"total_lines": page.selected_lines, "total_bytes": page.selected_bytes}
    )
    first_shown = page.start + 1
    if truncation.first_line_exceeds_limit:
        text = (
            f"[Line {first_shown} is {format_size(page.first_selected_line_bytes)}, over the "
            f"{format_size(DEFAULT_MAX_BYTES)} limit. Read part of it with bash: "
            f"sed -n '{first_shown}p' {display_path} | head -c {DEFAULT_MAX_BYTES}]"
        )
        return text, {"truncation": truncation.to_json_dict()}
    if truncation.truncated:
        last_shown = first_shown + truncation.output_lines - 1
        why = "" if truncation.truncated_by == "lines" else f" ({format_size(DEFAULT_MAX_BYTES)} limit)"
        text = (
            f"{truncation.content}\n\n[Lines {first_shown}-{last_shown} of {page.total_lines} shown{why}. "
            f"Continue with offset={last_shown + 1}.]"
        )
        return text, {"truncation": truncation.to_json_dict()}
    end = page.start + page.selected_lines
    if page.limit is not None and end < page.total_lines:
        remaining = page.total_lines - end
        return (
            f"{truncation.content}\n\n[{remaining} more lines in the file. Continue with offset={end + 1}.]",
            None,
        )
    if page.total_lines == 1 and not truncation.content:
        return "(empty file)", None
    return truncation.content, None


async def run_read(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    display_path: str = args["path"]
    offset = whole_number(args.get("offset", 1), "offset", "read", args)
    limit = args.get("limit")
    if limit is not None:
        limit = whole_number(limit, "limit", "read", args, minimum=1)
    start = max(offset, 1) - 1

    backend = ctx.backend
    path = await resolve_tool_path(display_path, ctx.cwd, backend)
    info = await backend.stat(path)
    if info is None:
        raise ToolError(f"File not found: {display_path}")
    if info.kind == "dir":
        raise ToolError(f"{display_path} is a directory, not a file; list it with ls")

    chunks = backend.iter_bytes(path)
    try:
        first = await anext(chunks, b"")
        mime = detect_image_mime(first)
        if mime is not None:
            return await _read_image(first, chunks, mime, display_path)
        if looks_binary(first):
            raise ToolError(binary_file_message(display_path))
        page = await _read_page(_chunks_with_first(first, chunks), start, limit, display_path)
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()
    if start >= page.total_lines:
        raise ToolError(
            f"Offset {offset} is past the end of {display_path}, which has {page.total_lines} lines"
        )
    text, details = _format_page(page, display_path)
    return text_outcome(text, details)


async def _read_image(first: bytes, rest: AsyncIterator[bytes], mime: str, display_path: str) -> ToolOutcome:
    data = bytearray(first)
    async for chunk in rest:
        data.extend(chunk)
        if len(data) > MAX_IMAGE_BYTES:
            raise ToolError(
                f"{display_path} is an image over {format_size(MAX_IMAGE_BYTES)}; too large to read"
            )
    try:
        image = await asyncio.to_thread(prepare_image, bytes(data), mime)
    except ValueError as error:
        raise ToolError(f"Cannot read image {display_path}: {error}") from None
    note = f"Image file {display_path} [{image.mime_type}]"
    if image.note:
        note += f"\n{image.note}"
    return ToolOutcome(
        content=[TextContent(text=note), ImageContent(data=image.data, mime_type=image.mime_type)]
    )
