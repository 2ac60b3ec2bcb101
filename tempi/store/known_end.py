"""How much of a session file tempi has accounted for, kept beside the file.

pi appends to the same files without telling anyone. A session's workflow remembers its
leaf, not the file, so a later write needs to know which lines are news: everything after
`size` that is not one of tempi's own lines (`own`) was appended by another program since
tempi last looked. The marker lives in the session's side folder, so every worker and
client that sees the file sees it too, across restarts of any of them.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from tempi.store.file_format import line_id
from tempi.store.sidecar import sidecar_dir

MARKER_NAME = "known-end.json"


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


def read_marker(session_path: str | Path, session_id: str) -> KnownEnd | None:
    """The marker, if it still describes this file (not replaced, not cut shorter)."""
    try:
        data = json.loads(marker_path(session_path, session_id).read_text(encoding="utf-8"))
        known = KnownEnd(inode=int(data["inode"]), size=int(data["size"]), own=[str(i) for i in data["own"]])
        stat = os.stat(session_path)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if stat.st_ino != known.inode or stat.st_size < known.size:
        return None
    return known


def write_marker(session_path: str | Path, session_id: str, known: KnownEnd) -> None:
    path = marker_path(session_path, session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"inode": known.inode, "size": known.size, "own": known.own}), encoding="utf-8")
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
