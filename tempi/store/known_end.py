"""How much of a session file tempi has accounted for, kept beside the file.

pi appends to the same files without telling anyone. A session's workflow remembers its
leaf, not the file, so a later write needs to know which lines are news: everything after
`size` that is not one of tempi's own lines (`own`) was appended by another program since
tempi last looked. The marker lives in the session's side folder, so every worker and
client that sees the file sees it too, across restarts of any of them.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from tempi.store.file_format import line_id
from tempi.store.modes import create_private_file, make_private_dirs
from tempi.store.sidecar import sidecar_dir

# One JSON record a line, the last whole one in force: appending a line costs a fraction of
# writing a temporary file and renaming it over the old one, which the model call did twice
# a turn (issue 13). The log starts again from its last record past MARKER_LOG_BYTES. Not
# named .jsonl: people and tools take every .jsonl under the sessions folder for a session.
MARKER_NAME = "known-end.log"
# Where tempi kept the marker before, as one JSON object: still read until the log exists.
LEGACY_MARKER_NAME = "known-end.json"
MARKER_LOG_BYTES = 16 * 1024


@dataclass
class KnownEnd:
    inode: int
    # Every line before this offset is tempi's own or was taken in as the session's history.
    size: int
    # tempi's own lines after `size`: written after a line of another program's that no
    # turn has continued from yet, so `size` could not move past them.
    own: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Line:
    entry_id: str
    end: int  # the offset just past the line


def marker_path(session_path: str | Path, session_id: str) -> Path:
    return sidecar_dir(session_path, session_id) / MARKER_NAME


def _record(raw: bytes) -> KnownEnd | None:
    try:
        data = json.loads(raw)
        return KnownEnd(inode=int(data["inode"]), size=int(data["size"]), own=[str(i) for i in data["own"]])
    except (ValueError, KeyError, TypeError):
        return None


def _last_record(log: bytes) -> KnownEnd | None:
    """The newest whole record: a line still being appended, or one a full disk cut short,
    is passed over."""
    for raw in reversed(log.split(b"\n")[:-1]):
        known = _record(raw)
        if known is not None:
            return known
    return None


def read_marker(session_path: str | Path, session_id: str) -> KnownEnd | None:
    """The marker, if it still describes this file (not replaced, not cut shorter)."""
    path = marker_path(session_path, session_id)
    try:
        known = _last_record(path.read_bytes())
    except FileNotFoundError:
        try:
            known = _record(path.with_name(LEGACY_MARKER_NAME).read_bytes())
        except OSError:
            return None
    except OSError:
        return None
    if known is None:
        return None
    try:
        stat = os.stat(session_path)
    except OSError:
        return None
    if stat.st_ino != known.inode or stat.st_size < known.size:
        return None
    return known


def write_marker(session_path: str | Path, session_id: str, known: KnownEnd) -> None:
    path = marker_path(session_path, session_id)
    line = json.dumps({"inode": known.inode, "size": known.size, "own": known.own}).encode() + b"\n"
    flags = os.O_WRONLY | os.O_APPEND
    try:
        fd = create_private_file(path, flags)
    except FileNotFoundError:
        make_private_dirs(path.parent)
        fd = create_private_file(path, flags)
    try:
        # One write: a reader sees the line whole or not at all (then the one before it).
        if os.write(fd, line) < len(line):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if size == len(line):
        # A new log: an older tempi, which reads only the old marker, must not trust it now.
        with contextlib.suppress(FileNotFoundError):
            path.with_name(LEGACY_MARKER_NAME).unlink()
    elif size > MARKER_LOG_BYTES:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = create_private_file(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        os.replace(tmp, path)


def mark_all_known(session_path: str | Path, session_id: str) -> None:
    """The file as it is now is the session's history: a session continued from the file's
    last entry has nothing to catch up on."""
    with contextlib.suppress(FileNotFoundError):
        stat = os.stat(session_path)
        write_marker(session_path, session_id, KnownEnd(inode=stat.st_ino, size=stat.st_size))


def lines_from(session_path: str | Path, start: int) -> tuple[int, list[Line]]:
    """The file's inode and its whole entry lines from offset `start` on; a last line
    without its newline may still be being written, so it waits for the next look."""
    with open(session_path, "rb") as handle:
        inode = os.fstat(handle.fileno()).st_ino
        handle.seek(start)
        data = handle.read()
    lines: list[Line] = []
    offset = start
    for raw in data.split(b"\n")[:-1]:
        offset += len(raw) + 1
        entry_id = line_id(raw)
        if entry_id is not None:
            lines.append(Line(entry_id=entry_id, end=offset))
    return inode, lines


def unaccounted_lines(session_path: str | Path, session_id: str) -> list[Line]:
    """Entry lines another program appended since tempi last wrote; none are known for a
    file without a marker (the next write works that out from the workflow's leaf)."""
    known = read_marker(session_path, session_id)
    if known is None:
        return []
    try:
        _, lines = lines_from(session_path, known.size)
    except FileNotFoundError:
        return []
    own = set(known.own)
    return [line for line in lines if line.entry_id not in own]


def take_in(session_path: str | Path, session_id: str, upto: Line) -> None:
    """The session moved onto `upto`, another program's line: it and everything before it
    are the session's history now, so a later move elsewhere in the tree (pi's /tree) is
    the user's choice and not news to catch up on."""
    known = read_marker(session_path, session_id)
    if known is None or upto.end <= known.size:
        return
    inode, lines = lines_from(session_path, known.size)
    own = set(known.own)
    later_own = [line.entry_id for line in lines if line.end > upto.end and line.entry_id in own]
    write_marker(session_path, session_id, KnownEnd(inode=inode, size=upto.end, own=later_own))
