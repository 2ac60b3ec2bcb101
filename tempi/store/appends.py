"""Durable, idempotent writes to session files.

Appends are idempotent by entry id: the workflow makes every id, so a retried append
activity writes nothing twice. Each append holds an exclusive `flock` on the file and is
fsynced before it returns. Files of versions 1 and 2 are upgraded in place on first touch,
atomically (a temporary file renamed over the old one).

pi appends to the same files without any lock, so nothing here may assume the end of the
file stays where it was read: entries go out as one `O_APPEND` write (the kernel places it
after whatever another writer appended meanwhile, and never between its bytes), and only
bytes known to be nobody else's are ever truncated: a write of ours cut short by a full
disk, or a torn last line nobody has touched for `STALE_TORN_LINE_S` (a crash; a live
writer's line in progress is younger). A younger torn line is sealed with a newline
instead, so it becomes one skipped line and never swallows the entries after it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from tempi.agent.session_entries import CURRENT_SESSION_VERSION, EntryBase, SessionHeader, parse_entry
from tempi.store.errors import ForeignSessionFileError, SessionFileError
from tempi.store.file_format import ParsedFile, is_json_object, json_line, line_id, parse_file, parse_header
from tempi.store.locking import FileLocks
from tempi.store.modes import create_private_file, make_private_dirs

# Id indexes a store keeps (least recently used dropped first): a long-lived worker
# touches many sessions, and whatever is dropped is read again from the file when needed.
MAX_CACHED_INDEXES = 256

# A torn last line this much older than now was left by a crash, not a write in progress:
# the kernel stamps a file's mtime when a write starts.
STALE_TORN_LINE_S = 2.0


class _NeedsUpgrade(Exception):
    """Raised inside an append when the file is version 1 or 2."""


def refuse_foreign(path: Path, owner: int) -> None:
    """Raise when the session file is not its reader's own: in a folder others could write
    to, another user may have swapped in a file of theirs to receive the owner's turns."""
    if owner != os.getuid():
        raise ForeignSessionFileError(
            f"{path} belongs to another user (uid {owner}, not {os.getuid()}); tempi does not "
            "write to a session file that is not yours. Check who replaced it, and keep your "
            "sessions in a folder only you can write to."
        )


def fsync_dir(directory: Path) -> None:
    """A new or renamed file survives a crash only once its directory entry is on disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class _IdIndex:
    """Ids of the entries in the first `size` bytes of one file (which end at a newline)."""

    inode: int
    size: int = 0
    ids: set[str] = field(default_factory=set)
    # Bytes of an unfinished last line after `size` that may still be another writer's.
    torn: int = 0


def upgrade_file(locks: FileLocks, path: Path) -> ParsedFile:
    """Rewrite a version 1 or 2 file as version 3; the parsed result either way."""
    with locks.locked(path) as handle:
        parsed = parse_file(handle.read(), path)
        if parsed.old_version is None:
            return parsed  # another process upgraded it meanwhile
        content = json_line(parsed.header) + b"".join(json_line(raw) for raw in parsed.raw_entries)
        replace_whole(path, content, ".upgrade-")
        return parsed


def replace_whole(path: Path, content: bytes, prefix: str) -> None:
    """Put `content` at `path` in one step: readers see the old file or the new one, and a
    crash midway leaves the old file."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    fsync_dir(path.parent)


def rewrite_header(locks: FileLocks, path: Path, old_id: str, header: Mapping[str, Any]) -> bool:
    """Replace the header line of a file that still holds session `old_id`, atomically;
    whether it did (False: someone else changed it meanwhile)."""
    with locks.locked(path) as handle:
        data = handle.read()
        first, _, rest = data.partition(b"\n")
        if parse_header(first.decode("utf-8", errors="replace"), path).get("id") != old_id:
            return False
        replace_whole(path, json_line(header) + rest, ".rename-")
        return True


class Appender:
    """Creates session files and appends to them, keeping an id index per file."""

    def __init__(self, locks: FileLocks) -> None:
        self._locks = locks
        self._indexes: dict[str, _IdIndex] = {}
        self._guard = threading.Lock()
        self._unsynced: set[str] = set()

    def create(self, path: Path, header: SessionHeader | Mapping[str, Any]) -> None:
        """Write the header line of a new file. Creating again with the same header is a
        no-op (a retried activity); a different session already there is an error."""
        if not isinstance(header, SessionHeader):
            try:
                header = SessionHeader.model_validate(dict(header))
            except ValidationError as exc:
                raise ValueError(f"not a session header: {exc.errors()[0]['msg']}") from None
        make_private_dirs(path.parent)
        with contextlib.suppress(FileExistsError):
            os.close(create_private_file(path, os.O_WRONLY | os.O_EXCL))
        with self._locks.locked(path) as handle:
            refuse_foreign(path, os.fstat(handle.fileno()).st_uid)
            existing = handle.read()
            first, newline, _ = existing.partition(b"\n")
            if existing.strip():
                try:
                    existing_header: dict[str, Any] | None = parse_header(
                        first.decode("utf-8", "replace"), path
                    )
                except SessionFileError:
                    if newline:
                        raise
                    existing_header = None  # torn by a crash during an earlier create
                if existing_header is not None:
                    if existing_header.get("id") != header.id:
                        raise SessionFileError(f"{path} already holds a different session")
                    if not newline:
                        handle.write(b"\n")
                        handle.flush()
                        os.fsync(handle.fileno())
                    return
            handle.seek(0)
            handle.truncate()
            handle.write(json_line(header.to_json_dict()))
            handle.flush()
            os.fsync(handle.fileno())
        fsync_dir(path.parent)

    def append(
        self, path: Path, entries: Sequence[EntryBase | Mapping[str, Any]], *, durable: bool = True
    ) -> int:
        """Append the entries whose ids the file does not hold yet; returns how many were
        written. Dicts are checked as entries first (ValueError when one is not).
        `durable=False` leaves the fsync to the file's next durable append or `sync`."""
        prepared: list[tuple[str, bytes]] = []
        for entry in entries:
            data = entry.to_json_dict() if isinstance(entry, EntryBase) else dict(entry)
            if isinstance(entry, Mapping):
                try:
                    parse_entry(data)
                except ValidationError as exc:
                    raise ValueError(f"not a session entry: {exc.errors()[0]['msg']}") from None
            if data.get("type") == "session":
                raise ValueError("a session header cannot be appended as an entry")
            prepared.append((str(data["id"]), json_line(data)))

        try:
            written = self._append_lines(path, prepared, durable)
        except _NeedsUpgrade:
            upgrade_file(self._locks, path)
            written = self._append_lines(path, prepared, durable)
        key = str(path.absolute())
        if durable:
            self._unsynced.discard(key)  # fsync covers every earlier write to the file
        elif written:
            self._unsynced.add(key)
        return written

    def sync(self, path: Path) -> None:
        """fsync what `append(durable=False)` left in the file, if anything."""
        key = str(path.absolute())
        if key in self._unsynced:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._unsynced.discard(key)

    def has_entry(self, path: Path, entry_id: str) -> bool:
        """Whether the file holds an entry with this id (as read now, other writers included)."""
        try:
            return entry_id in self._locked_index(path).ids
        except _NeedsUpgrade:
            upgrade_file(self._locks, path)
            return entry_id in self._locked_index(path).ids

    def _locked_index(self, path: Path) -> _IdIndex:
        with self._locks.locked(path) as handle:
            return self._current_index(path, handle)

    def _append_lines(self, path: Path, prepared: list[tuple[str, bytes]], durable: bool) -> int:
        with self._locks.locked(path) as handle:
            index = self._current_index(path, handle)
            new_ids: list[str] = []
            lines: list[bytes] = []
            for entry_id, line in prepared:
                if entry_id not in index.ids and entry_id not in new_ids:
                    new_ids.append(entry_id)
                    lines.append(line)
            if lines:
                # A torn line another writer may still be finishing gets its own line.
                payload = (b"\n" if index.torn else b"") + b"".join(lines)
                start, end = _append_once(path, handle, payload, durable)
                # Only now: a failed write must leave the ids retryable.
                index.ids.update(new_ids)
                if start == index.size + index.torn:
                    index.size, index.torn = end, 0
                # Otherwise another writer appended in between: the next look reads from
                # where this one left off and takes in their lines and ours alike.
            return len(lines)

    def _current_index(self, path: Path, handle: BinaryIO) -> _IdIndex:
        """The id index brought up to date with the file's tail (other processes may have
        appended), after upgrading an old file and repairing a torn last line."""
        key = str(path.absolute())
        stat = os.fstat(handle.fileno())
        refuse_foreign(path, stat.st_uid)
        with self._guard:
            index = self._indexes.pop(key, None)
            if index is None or index.inode != stat.st_ino or stat.st_size < index.size:
                index = _IdIndex(inode=stat.st_ino)
            self._indexes[key] = index
            while len(self._indexes) > MAX_CACHED_INDEXES:
                self._indexes.pop(next(iter(self._indexes)))
        if index.size == 0:
            handle.seek(0)
            first = handle.readline()
            if not first.strip():
                raise SessionFileError(f"{path} has no session header yet; create the session first")
            header = parse_header(first.decode("utf-8", errors="replace"), path)
            version = header.get("version", 1)
            if not isinstance(version, int) or version < CURRENT_SESSION_VERSION:
                raise _NeedsUpgrade
        handle.seek(index.size)
        tail = handle.read()
        complete_end = tail.rfind(b"\n") + 1
        for line in tail[:complete_end].split(b"\n"):
            entry_id = line_id(line)
            if entry_id is not None:
                index.ids.add(entry_id)
        index.size += complete_end
        index.torn = 0
        torn = tail[complete_end:]
        if not torn:
            return index
        if is_json_object(torn):
            # The line was written whole; only its newline is missing (lost, or not yet written).
            start, end = _append_once(path, handle, b"\n")
            entry_id = line_id(torn)
            if entry_id is not None:
                index.ids.add(entry_id)
            if start == index.size + len(torn):
                index.size = end
            return index
        if _untouched_since(handle, index.size + len(torn), STALE_TORN_LINE_S):
            # Left by a crash: drop it, so readers never see a torn line.
            os.ftruncate(handle.fileno(), index.size)
            os.fsync(handle.fileno())
        else:
            index.torn = len(torn)
        return index


def _untouched_since(handle: BinaryIO, size: int, seconds: float) -> bool:
    stat = os.fstat(handle.fileno())
    return stat.st_size == size and time.time_ns() - stat.st_mtime_ns > seconds * 1e9


def _append_once(path: Path, handle: BinaryIO, payload: bytes, durable: bool = True) -> tuple[int, int]:
    """Append `payload` in one `O_APPEND` write, fsynced if `durable`; where it landed (start, end).

    Another writer's appends may land before it but never inside it. A write cut short
    (a full disk) is rolled back, when nothing was appended after it, so readers never see
    a torn line of ours; the error is raised either way.
    """
    # Straight to a descriptor: a buffered writer could flush leftovers later.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        if os.fstat(fd).st_ino != os.fstat(handle.fileno()).st_ino:
            raise SessionFileError(f"{path} was replaced while it was being appended to; try again")
        view = memoryview(payload)
        written = 0
        end = 0
        try:
            while written < len(payload):
                written += os.write(fd, view[written:])
                end = os.lseek(fd, 0, os.SEEK_CUR)
            if durable:
                os.fsync(fd)
        except OSError:
            if written:
                # Truncating needs no space; only our own bytes are cut.
                with contextlib.suppress(OSError):
                    if os.fstat(fd).st_size == end:
                        os.ftruncate(fd, end - written)
                        os.fsync(fd)
            raise
        return end - len(payload), end
    finally:
        os.close(fd)
