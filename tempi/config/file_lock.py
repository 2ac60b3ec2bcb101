"""A lock on a file that pi's `proper-lockfile` (4.1.2) honours, and that honours it.

The protocol, as proper-lockfile implements it: the lock is the directory `<file>.lock`
(mkdir is atomic); a lock whose mtime is older than `stale` seconds belongs to a process
that died and is removed; the holder touches the directory's mtime every few seconds so a
long hold is not taken for a dead one; releasing removes the directory. A taken lock is
tried again with proper-lockfile's (the `retry` package's) exponential backoff.

pi waits on auth.json with `stale: 30 s` and 10 retries (up to about a minute and a half)
when refreshing, but only 10 × 20 ms when merely reading it, with `stale: 10 s`: so the
holder here touches the lock every 3 s and holds it only for a read, a token request and
a write.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

STALE_S = 30.0
TOUCH_EVERY_S = 3.0


class LockBusy(Exception):
    """The lock stayed taken through every retry."""


class LockLost(Exception):
    """Someone removed our lock while we held it (it looked stale to them)."""


def lock_path(path: Path) -> Path:
    """Where the lock of `path` lives: proper-lockfile resolves symlinks, then adds `.lock`."""
    return Path(os.path.realpath(path) + ".lock")


def _try_mkdir(directory: Path, stale_s: float, check_stale: bool = True) -> bool:
    try:
        os.mkdir(directory)
        return True
    except FileExistsError:
        pass
    if not check_stale:
        return False
    try:
        mtime = os.stat(directory).st_mtime
    except FileNotFoundError:
        return _try_mkdir(directory, stale_s, check_stale=False)
    if mtime >= time.time() - stale_s:
        return False
    with suppress(FileNotFoundError):
        os.rmdir(directory)
    return _try_mkdir(directory, stale_s, check_stale=False)


def _backoff(attempt: int, min_s: float, max_s: float, factor: float) -> float:
    """The `retry` package's timeout for attempt n (0-based), randomized as pi asks."""
    return min(random.uniform(1, 2) * min_s * factor**attempt, max_s)


class _Toucher(threading.Thread):
    def __init__(self, directory: Path) -> None:
        super().__init__(name=f"lock-touch {directory.name}", daemon=True)
        self.directory = directory
        self.stop = threading.Event()
        self.lost = False

    def run(self) -> None:
        while not self.stop.wait(TOUCH_EVERY_S):
            try:
                os.utime(self.directory)
            except FileNotFoundError:
                self.lost = True
                return
            except OSError:
                continue


class HeldLock:
    def __init__(self, toucher: _Toucher) -> None:
        self._toucher = toucher

    def check(self) -> None:
        """Raise LockLost when another process has taken the lock from us (before writing)."""
        if self._toucher.lost or not self._toucher.directory.is_dir():
            raise LockLost(f"the lock {self._toucher.directory} was removed by another process")


@contextmanager
def locked(
    path: Path,
    *,
    stale_s: float = STALE_S,
    retries: int = 10,
    min_wait_s: float = 0.1,
    max_wait_s: float = 10.0,
    factor: float = 2.0,
) -> Iterator[HeldLock]:
    """Hold the proper-lockfile lock of `path` (which should exist) for the block."""
    directory = lock_path(path)
    for attempt in range(retries + 1):
        if _try_mkdir(directory, stale_s):
            break
        if attempt == retries:
            raise LockBusy(f"{path} stayed locked by another program ({directory} exists)")
        time.sleep(_backoff(attempt, min_wait_s, max_wait_s, factor))
    toucher = _Toucher(directory)
    toucher.start()
    try:
        yield HeldLock(toucher)
    finally:
        toucher.stop.set()
        toucher.join()
        if not toucher.lost:
            with suppress(FileNotFoundError):
                os.rmdir(directory)
