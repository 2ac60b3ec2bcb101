"""The live side channel: streaming deltas written by activities, tailed by watchers.

Each line is `{"attempt": n, ...}`; a retried activity attempt starts over, and readers
keep only the newest attempt's lines so text is never shown twice.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, TextIO

from tempi.store.modes import create_private_file, make_private_dirs


class LiveWriter:
    """Appends one activity attempt's deltas. The file is made at the first write: most tool
    calls (read, write, edit, ls) stream nothing, and a watcher takes a missing file as a
    stream with nothing in it yet."""

    def __init__(self, path: Path, attempt: int) -> None:
        self.path = path
        self.attempt = attempt
        self._fh: TextIO | None = None

    def write(self, payload: dict[str, Any]) -> None:
        if self._fh is None:
            self._fh = self._open()
        self._fh.write(json.dumps({"attempt": self.attempt, **payload}, ensure_ascii=False) + "\n")
        self._fh.flush()

    def _open(self) -> TextIO:
        make_private_dirs(self.path.parent)
        # Model text is the user's: owner-only whatever the umask.
        fd = create_private_file(self.path, os.O_WRONLY | os.O_APPEND)
        return open(fd, "a", encoding="utf-8")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


class LiveReader:
    """Incremental reader of one live file; tolerates a missing file and half-written lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pos = 0
        self._buf = ""
        self.attempt = 0

    def read_new(self) -> tuple[list[dict[str, Any]], bool]:
        """New payloads of the newest attempt, and whether a newer attempt restarted the stream."""
        try:
            with open(self.path, encoding="utf-8") as fh:
                fh.seek(self._pos)
                chunk = fh.read()
                self._pos = fh.tell()
        except FileNotFoundError:
            return [], False
        self._buf += chunk
        *lines, self._buf = self._buf.split("\n")
        restarted = False
        out: list[dict[str, Any]] = []
        for line in lines:
            try:
                item = json.loads(line)
            except ValueError:
                continue
            attempt = int(item.pop("attempt", 0))
            if attempt < self.attempt:
                continue
            if attempt > self.attempt:
                if self.attempt:
                    restarted = True
                    out = []
                self.attempt = attempt
            out.append(item)
        return out, restarted


def remove_live_files(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
