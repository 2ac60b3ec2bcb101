"""Collecting a command's output without holding all of it.

Only a tail window stays in memory. Once the output outgrows what the model will be
shown, everything (from the first byte) also goes to a spill file, so the full output
stays available however large it gets.
"""

from __future__ import annotations

import os
import re
from typing import BinaryIO

from tempi.agent.truncation import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, TruncationResult, truncate_tail
from tempi.store.modes import PRIVATE_FILE_MODE

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _final_redraw(line: str) -> str:
    """A line redrawn with carriage returns (progress bars) shows its last version."""
    if "\r" not in line:
        return line
    versions = [version for version in line.split("\r") if version]
    return versions[-1] if versions else ""


def clean_terminal_text(text: str) -> str:
    """What a terminal would show, as plain text: no colour codes, redraws collapsed,
    no other control characters."""
    text = _ANSI_ESCAPE.sub("", text).replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(_final_redraw(line) for line in text.split("\n"))
    return _CONTROL.sub("", text)


class OutputAccumulator:
    def __init__(
        self, spill_path: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.spill_path = spill_path
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.total_bytes = 0
        self.newlines = 0
        self.last_line_bytes = 0  # raw bytes after the last newline
        # Raw bytes kept in memory: room for terminal codes and redraws that cleaning removes.
        self._keep = 4 * max_bytes
        self._tail = bytearray()
        self._spill: BinaryIO | None = None

    @property
    def spilled(self) -> bool:
        return self._spill is not None

    def append(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        newlines = chunk.count(b"\n")
        self.newlines += newlines
        self.last_line_bytes = (
            len(chunk) - chunk.rfind(b"\n") - 1 if newlines else self.last_line_bytes + len(chunk)
        )
        self._tail.extend(chunk)
        if self._spill is not None:
            self._spill.write(chunk)
        elif self.total_bytes > self.max_bytes or self.newlines + 1 > self.max_lines:
            # Until now nothing was dropped from the tail, so it is the whole output.
            self._spill = open(self.spill_path, "wb", opener=lambda p, f: os.open(p, f, PRIVATE_FILE_MODE))  # noqa: SIM115
            self._spill.write(self._tail)
        if len(self._tail) > 2 * self._keep:
            del self._tail[: len(self._tail) - self._keep]

    def snapshot(self) -> TruncationResult:
        """The tail as the model would see it now."""
        data = bytes(self._tail)
        window_is_partial = len(data) < self.total_bytes
        if window_is_partial:
            newline = data.find(b"\n")
            if newline >= 0:
                data = data[newline + 1 :]  # the window's first line is incomplete
            else:
                start = 0
                while start < len(data) and (data[start] & 0xC0) == 0x80:
                    start += 1  # one giant line: start on a character boundary
                data = data[start:]
        result = truncate_tail(
            clean_terminal_text(data.decode("utf-8", errors="replace")), self.max_lines, self.max_bytes
        )
        if result.truncated or window_is_partial:
            # Counts refer to the raw output, the same bytes the spill file holds.
            update: dict[str, object] = {"total_lines": self.newlines + 1, "total_bytes": self.total_bytes}
            if not result.truncated:  # dropped from memory, even if the rest cleans up small
                update |= {"truncated": True, "truncated_by": "bytes"}
            result = result.model_copy(update=update)
        return result

    def close(self) -> None:
        if self._spill is not None:
            self._spill.close()

    def finish(self) -> TruncationResult:
        """Close the spill file and return the final view. A spill file that turns out
        not to be needed (terminal codes made the output look bigger than it is) is removed."""
        self.close()
        result = self.snapshot()
        if self._spill is not None and not result.truncated:
            os.unlink(self.spill_path)
            self._spill = None
        return result
