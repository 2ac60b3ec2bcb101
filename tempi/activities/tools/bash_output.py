"""Collecting a command's output without holding all of it.

Only a tail window stays in memory. Once the output outgrows what the model will be
shown, everything (from the first byte) also goes to a spill file, up to a cap
(`TEMPI_SPILL_MAX_MB` on the worker, default 64) so that a command printing gigabytes
cannot fill the disk under the session. A spill file that cannot be written (a full disk)
is removed and spilling stops; the command and the model's tail go on either way, and the
result says what was not saved.
"""

from __future__ import annotations

import contextlib
import errno
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


def _open_private(path: str) -> BinaryIO:
    # A new file under a random name: a link or file planted there is refused, not followed.
    return open(path, "xb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW, PRIVATE_FILE_MODE))


SPILL_MAX_ENV = "TEMPI_SPILL_MAX_MB"
DEFAULT_SPILL_MAX_MB = 64


def spill_max_bytes() -> int:
    """The cap on one spill file: `TEMPI_SPILL_MAX_MB` (a number of MB, read on the worker),
    default 64 MB; a value that is not a non-negative number leaves the default."""
    raw = os.environ.get(SPILL_MAX_ENV, "").strip()
    try:
        megabytes = float(raw) if raw else DEFAULT_SPILL_MAX_MB
    except ValueError:
        megabytes = DEFAULT_SPILL_MAX_MB
    if megabytes < 0 or megabytes != megabytes:  # negative or NaN
        megabytes = DEFAULT_SPILL_MAX_MB
    return int(megabytes * 1024 * 1024)


class OutputAccumulator:
    def __init__(
        self,
        spill_path: str,
        max_lines: int = DEFAULT_MAX_LINES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_spill_bytes: int | None = None,
    ) -> None:
        self.spill_path = spill_path
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.max_spill_bytes = spill_max_bytes() if max_spill_bytes is None else max_spill_bytes
        self.spilled_bytes = 0
        # The spill file stopped at max_spill_bytes: it holds the output's start only.
        self.spill_cut = False
        # Writing the spill file failed (a full disk): the file is gone, spilling stopped.
        self.spill_error: OSError | None = None
        self._spilling = False
        self.total_bytes = 0
        self.newlines = 0
        self.last_line_bytes = 0  # raw bytes after the last newline
        # Raw bytes kept in memory: room for terminal codes and redraws that cleaning removes.
        self._keep = 4 * max_bytes
        self._tail = bytearray()
        self._spill: BinaryIO | None = None

    @property
    def spilled(self) -> bool:
        """Whether a spill file holds (the start of) the output."""
        return self._spilling and self.spill_error is None

    def _write_spill(self, data: bytes | bytearray) -> None:
        """Up to the cap; never raises, since the output must keep flowing (an exception
        here would stop the reader and block the command on its full pipe)."""
        if self._spill is None:
            return
        room = self.max_spill_bytes - self.spilled_bytes
        piece = data if len(data) <= room else memoryview(data)[: max(room, 0)]
        try:
            if piece:
                self._spill.write(piece)
                self.spilled_bytes += len(piece)
            if len(piece) < len(data):
                self.spill_cut = True
                self._spill.close()
                self._spill = None
        except OSError as err:
            self._give_up_spilling(err)

    def _give_up_spilling(self, err: OSError) -> None:
        self.spill_error = err
        spill, self._spill = self._spill, None
        if spill is not None:
            with contextlib.suppress(OSError):
                spill.close()
        # The file is what filled the disk: free the space it took.
        with contextlib.suppress(OSError):
            os.unlink(self.spill_path)

    def append(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        newlines = chunk.count(b"\n")
        self.newlines += newlines
        self.last_line_bytes = (
            len(chunk) - chunk.rfind(b"\n") - 1 if newlines else self.last_line_bytes + len(chunk)
        )
        self._tail.extend(chunk)
        if self._spilling:
            self._write_spill(chunk)
        elif self.total_bytes > self.max_bytes or self.newlines + 1 > self.max_lines:
            # Until now nothing was dropped from the tail, so it is the whole output.
            self._spilling = True
            try:
                self._spill = _open_private(self.spill_path)
            except OSError as err:
                self._give_up_spilling(err)
            self._write_spill(self._tail)
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
            spill, self._spill = self._spill, None
            try:
                spill.close()  # flushes: a full disk may show only now
            except OSError as err:
                self._give_up_spilling(err)

    def finish(self) -> TruncationResult:
        """Close the spill file and return the final view. A spill file that turns out
        not to be needed (terminal codes made the output look bigger than it is) is removed."""
        self.close()
        result = self.snapshot()
        if self.spilled and not result.truncated:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.spill_path)
            self._spilling = False
        return result

    def unsaved_reason(self) -> str | None:
        """Why the full output could not be saved, for the model; None when it was or was
        not needed."""
        if self.spill_error is None:
            return None
        if self.spill_error.errno in (errno.ENOSPC, errno.EDQUOT):
            where = os.path.dirname(self.spill_path)
            return f"no space left on the device holding {where}. Free some space to keep the next one"
        return self.spill_error.strerror or str(self.spill_error)
