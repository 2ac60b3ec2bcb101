"""Cutting tool output down to what fits in a model's context.

Two independent limits, whichever is hit first: a line count and a UTF-8 byte count.
File-like output (read, grep, find, ls) keeps the head; command output (bash) keeps
the tail, because errors and results come last. Lines are never split, except the
single-line case of a tail cut, where the end of an over-long last line is kept.
Line counting follows `text.split("\\n")`, so a trailing newline counts as one more
(empty) line, as in pi.
"""

from __future__ import annotations

from typing import Literal

from tempi.agent.base import PiModel

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024
GREP_MAX_LINE_CHARS = 500

TruncatedBy = Literal["lines", "bytes"]


class TruncationResult(PiModel):
    """What was kept and how much there was; serialised into tool result details."""

    content: str
    truncated: bool
    truncated_by: TruncatedBy | None
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    last_line_partial: bool = False
    first_line_exceeds_limit: bool = False
    max_lines: int
    max_bytes: int


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def format_size(num_bytes: int) -> str:
    """Human size as pi prints it: 512B, 68.4KB, 3.0MB."""
    if num_bytes < 1024:
        return f"{num_bytes}B"
    if num_bytes < 1024 * 1024:
        return f"{num_bytes / 1024:.1f}KB"
    return f"{num_bytes / (1024 * 1024):.1f}MB"


def _untruncated(text: str, lines: int, size: int, max_lines: int, max_bytes: int) -> TruncationResult:
    return TruncationResult(
        content=text,
        truncated=False,
        truncated_by=None,
        total_lines=lines,
        total_bytes=size,
        output_lines=lines,
        output_bytes=size,
        max_lines=max_lines,
        max_bytes=max_bytes,
    )


def truncate_head(
    text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> TruncationResult:
    """Keep whole lines from the start. A first line over the byte limit keeps nothing
    and sets `first_line_exceeds_limit`, so the caller can suggest another way in."""
    total_bytes = utf8_len(text)
    total_lines = text.count("\n") + 1
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return _untruncated(text, total_lines, total_bytes, max_lines, max_bytes)

    kept: list[str] = []
    kept_bytes = 0
    truncated_by: TruncatedBy = "lines"
    for line in text.split("\n", max_lines)[:max_lines]:
        line_bytes = utf8_len(line) + (1 if kept else 0)
        if kept_bytes + line_bytes > max_bytes:
            truncated_by = "bytes"
            break
        kept.append(line)
        kept_bytes += line_bytes

    content = "\n".join(kept)
    return TruncationResult(
        content=content,
        truncated=True,
        truncated_by=truncated_by,
        total_lines=total_lines,
        total_bytes=total_bytes,
        output_lines=len(kept),
        output_bytes=utf8_len(content),
        first_line_exceeds_limit=not kept and truncated_by == "bytes",
        max_lines=max_lines,
        max_bytes=max_bytes,
    )


def truncate_tail(
    text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> TruncationResult:
    """Keep whole lines from the end; if even the last line is too long, keep its end."""
    total_bytes = utf8_len(text)
    total_lines = text.count("\n") + 1
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return _untruncated(text, total_lines, total_bytes, max_lines, max_bytes)

    lines = text.rsplit("\n", max_lines)[-max_lines:]
    kept: list[str] = []
    kept_bytes = 0
    truncated_by: TruncatedBy = "lines"
    last_line_partial = False
    for line in reversed(lines):
        line_bytes = utf8_len(line) + (1 if kept else 0)
        if kept_bytes + line_bytes > max_bytes:
            truncated_by = "bytes"
            if not kept:
                kept.append(tail_of_utf8(line, max_bytes))
                last_line_partial = True
            break
        kept.append(line)
        kept_bytes += line_bytes

    content = "\n".join(reversed(kept))
    return TruncationResult(
        content=content,
        truncated=True,
        truncated_by=truncated_by,
        total_lines=total_lines,
        total_bytes=total_bytes,
        output_lines=len(kept),
        output_bytes=utf8_len(content),
        last_line_partial=last_line_partial,
        max_lines=max_lines,
        max_bytes=max_bytes,
    )


def tail_of_utf8(text: str, max_bytes: int) -> str:
    """The longest suffix of `text` that fits in `max_bytes`, cut on a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    start = len(data) - max_bytes
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:].decode("utf-8")


def truncate_line(line: str, max_chars: int = GREP_MAX_LINE_CHARS) -> tuple[str, bool]:
    """Cut one line to `max_chars` characters with a visible marker; says whether it cut."""
    if len(line) <= max_chars:
        return line, False
    return f"{line[:max_chars]}... [line truncated]", True
