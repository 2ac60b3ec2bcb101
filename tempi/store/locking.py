"""Exclusive and shared access to one session file, across threads and processes.

Appends hold an exclusive `flock` because a worker and a CLI (or two workers after a
retry) may touch the same session at once; loads hold a shared one so they never read
an append half-written. The upgrade of an old file replaces it, so a lock is only good once the
path still names the file that was locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from tempi.store.errors import SessionFileError


class FileLocks:
    """One thread lock per session file, for the lifetime of a store."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._file_locks: dict[str, threading.Lock] = {}

    def _thread_lock(self, path: Path) -> threading.Lock:
        with self._guard:
            return self._file_locks.setdefault(str(path.absolute()), threading.Lock())

    @contextlib.contextmanager
    def locked(self, path: Path, exclusive: bool = True) -> Iterator[BinaryIO]:
        """The open file under flock. The upgrade of an old file replaces it, so after
        taking the lock make sure the path still names the file that is locked."""
        with self._thread_lock(path):
            while True:
                try:
                    handle = open(path, "r+b" if exclusive else "rb")  # noqa: SIM115
                except FileNotFoundError:
                    raise SessionFileError(f"Session file {path} does not exist") from None
                except OSError as exc:
                    raise SessionFileError(f"Cannot open session file {path}: {exc}") from None
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                    try:
                        current = os.stat(path).st_ino
                    except FileNotFoundError:
                        current = -1
                    if current == os.fstat(handle.fileno()).st_ino:
                        yield handle
                        return
                finally:
                    handle.close()
