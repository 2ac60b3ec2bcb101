"""A workflow's doorbell: how a worker tells the watchers on its machine that a workflow's
state moved, so they ask it for news only then, or not at all.

A watcher learns of new log events by a query the workflow's worker answers. Asked on a
timer, an idle session costs its worker and the server a query per watcher group twenty
times a second, and a turn a query or two more than the news it brought. A worker that runs
a workflow task which moved what watchers read appends a ring to the workflow's doorbell
file under its home; a watcher with the same home looks at the file's size (a `stat`, no
query) and, when it changed, reads what the ring says (store/doorbell_feed.py): the log's
new end and, while a watcher listens, the new events themselves, so it need not ask at all.
Nothing here is needed for correctness: a watcher that finds no doorbell (a worker on
another machine or with another home) follows the workflow's history instead
(client/history_bell.py), and one whose doorbell stays silent looks now and then
(`QUIET_ASK_S`) whether the history grew (client/history_mark.py), in case the workflow
moved to a worker that rings elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from tempi.config.paths import ForeignHomeError, tempi_home
from tempi.store.modes import create_private_file, make_private_dirs
from tempi.store.sidecar import safe_key

DOORBELLS = "doorbells"
# A doorbell file is replaced by a new one past this size; a watcher sees that as a ring too.
RESTART_AT_BYTES = 1 << 20
# A watcher that reads events from the doorbell touches `<bell>.watch` this often; a worker
# writes events into rings while the file is younger than LISTENING_FOR_S.
LISTEN_EVERY_S = 5.0
LISTENING_FOR_S = 30.0
# A watcher with a doorbell looks whether the workflow's history grew this often while it
# stays silent (client/history_mark.py), and asks the workflow only then.
QUIET_ASK_S = 1.0
# A worker starting removes the doorbells nobody rang for this long: one file per workflow
# would otherwise pile up. A session idle for longer gets its doorbell back at its next task.
FORGET_AFTER_S = 7 * 24 * 3600

# What a watcher compares: the file's inode and size, or None while there is no file (or, in
# three numbers, a workflow history's position: client/history_bell.py).
BellState = tuple[int, ...] | None


def doorbells_dir() -> Path:
    return tempi_home() / DOORBELLS


def worker_doorbells() -> Path | None:
    """Where a worker rings, or None (no doorbells) when its home cannot be used."""
    try:
        return doorbells_dir()
    except (ForeignHomeError, OSError):
        return None


def doorbell_path(directory: Path, workflow_id: str) -> Path:
    return directory / safe_key(workflow_id)


def ring(path: Path, lines: bytes = b".\n") -> None:
    """Say that the workflow's state moved, with `lines` (doorbell_feed.py) in one write.
    Never raises: a bell that cannot ring leaves its watchers asking on their quiet timer."""
    with contextlib.suppress(OSError):
        fd = create_private_file(path, os.O_WRONLY | os.O_APPEND)
        try:
            if os.fstat(fd).st_size < RESTART_AT_BYTES:
                os.write(fd, lines)
                return
        finally:
            os.close(fd)
        # Replaced, not truncated: a watcher part way through the old file finishes reading
        # it and starts the new one (another inode) from its beginning.
        fresh = path.with_name(path.name + ".new")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(fresh)
        fd = create_private_file(fresh, os.O_WRONLY | os.O_EXCL)
        try:
            os.write(fd, lines)
        finally:
            os.close(fd)
        os.replace(fresh, path)


def listening(path: Path) -> bool:
    """Whether a watcher reads events from this doorbell (it touched its marker lately)."""
    try:
        return time.time() - os.stat(_marker(path)).st_mtime < LISTENING_FOR_S
    except OSError:
        return False


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".watch")


def prepare(directory: Path) -> None:
    """Make the doorbells' folder (private), so that ringing costs one open, write and close,
    and clear it of doorbells long silent."""
    with contextlib.suppress(OSError):
        make_private_dirs(directory)
        cutoff = time.time() - FORGET_AFTER_S
        with os.scandir(directory) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_file() and entry.stat().st_mtime < cutoff:
                        os.unlink(entry.path)


class Doorbell:
    """One watcher's view of a workflow's doorbell."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._listened_at = -LISTEN_EVERY_S

    def listen(self, now: float) -> None:
        """Ask the worker for events in its rings (at most every LISTEN_EVERY_S of `now`, a
        monotonic clock). A marker that cannot be made leaves the rings bare."""
        if now - self._listened_at < LISTEN_EVERY_S:
            return
        self._listened_at = now
        with contextlib.suppress(OSError):
            os.close(create_private_file(_marker(self.path), os.O_WRONLY))
            os.utime(_marker(self.path))

    def state(self) -> BellState:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return info.st_ino, info.st_size


def watcher_doorbell(workflow_id: str) -> Doorbell | None:
    """The doorbell of `workflow_id` that a worker sharing this process's home rings, or None
    when the home cannot be used here."""
    try:
        return Doorbell(doorbell_path(doorbells_dir(), workflow_id))
    except (ForeignHomeError, OSError):
        return None  # watched by timer, as without a doorbell
