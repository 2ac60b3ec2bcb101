"""Session files on disk: pi's JSONL format, version 3, one entry per line.

Appends are idempotent by entry id: the workflow makes every id, so a retried append
activity writes nothing twice. Each append holds an exclusive `flock` on the file,
repairs a line torn by a crash, and is fsynced before it returns. Files written by pi
(versions 1 and 2 included) load; old versions are upgraded in place on first touch.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from tempi.agent.base import PiModel
from tempi.agent.session_entries import (
    CURRENT_SESSION_VERSION,
    EntryBase,
    SessionEntry,
    SessionHeader,
    parse_entry,
)
from tempi.agent.session_tree import SessionTree


class SessionFileError(Exception):
    """A session file is missing, unreadable or not a session file."""


class _NeedsUpgrade(Exception):
    """Raised inside an append when the file is version 1 or 2."""


class SessionNotFoundError(SessionFileError):
    pass


class AmbiguousSessionError(SessionFileError):
    pass


@dataclass
class LoadedSession:
    path: Path
    header: SessionHeader
    entries: list[SessionEntry]
    tree: SessionTree
    # Lines that were not JSON objects with a string `type` and `id`.
    skipped_lines: int = 0
    # The version the file had before it was upgraded, when it was.
    migrated_from: int | None = None


class SessionSummary(PiModel):
    path: Path
    id: str
    cwd: str
    name: str | None = None
    parent_session: str | None = None
    created: datetime
    modified: datetime
    message_count: int
    first_message: str | None = None


def session_dir_name(cwd: str) -> str:
    """pi's directory name for a working directory: `/home/u/p` -> `--home-u-p--`."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    return "--" + trimmed.replace("/", "-").replace("\\", "-").replace(":", "-") + "--"


def session_file_name(session_id: str, timestamp: str) -> str:
    """pi's file name: the header's ISO timestamp with `:` and `.` turned into `-`."""
    return timestamp.replace(":", "-").replace(".", "-") + f"_{session_id}.jsonl"


# --- reading and upgrading -------------------------------------------------------------


def _decode_lines(data: bytes) -> list[str]:
    lines = []
    # Only "\n" ends a line: U+2028 and friends may sit inside JSON strings.
    for raw in data.split(b"\n"):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = "\x00"  # counted as a malformed line below
        if text.strip():
            lines.append(text)
    return lines


def _parse_header(line: str | None, path: Path) -> dict[str, Any]:
    try:
        header = json.loads(line) if line is not None else None
    except json.JSONDecodeError:
        header = None
    if (
        not isinstance(header, dict)
        or header.get("type") != "session"
        or not isinstance(header.get("id"), str)
    ):
        raise SessionFileError(f"{path} is not a session file: its first line is not a session header")
    return header


def _derived_id(session_id: str, index: int, taken: set[str]) -> str:
    # Deterministic, so two processes upgrading the same file agree on the ids.
    salt = 0
    while True:
        candidate = hashlib.sha256(f"{session_id}:{index}:{salt}".encode()).hexdigest()[:8]
        if candidate not in taken:
            return candidate
        salt += 1


def _upgrade_v1(header: dict[str, Any], raw: list[dict[str, Any]]) -> None:
    """Version 1 had no ids: link the entries into one chain in file order, and turn a
    compaction's `firstKeptEntryIndex` (a line index counting the header) into an id."""
    taken: set[str] = set()
    previous: str | None = None
    for index, entry in enumerate(raw):
        entry["id"] = _derived_id(str(header["id"]), index, taken)
        taken.add(entry["id"])
        entry["parentId"] = previous
        previous = entry["id"]
        if entry.get("type") == "compaction" and "firstKeptEntryIndex" in entry:
            target = entry.pop("firstKeptEntryIndex")
            if isinstance(target, int) and 1 <= target <= index:
                entry["firstKeptEntryId"] = raw[target - 1]["id"]


def _upgrade_v2(raw: list[dict[str, Any]]) -> None:
    """Version 3 renamed the `hookMessage` role to `custom`."""
    for entry in raw:
        message = entry.get("message")
        if (
            entry.get("type") == "message"
            and isinstance(message, dict)
            and message.get("role") == "hookMessage"
        ):
            message["role"] = "custom"


@dataclass
class _ParsedFile:
    header: dict[str, Any]
    raw_entries: list[dict[str, Any]]
    skipped: int
    old_version: int | None


def _raw_entries(lines: list[str]) -> tuple[list[dict[str, Any]], int]:
    """JSON objects with a string `type` (other than a header), and how many lines were not."""
    raw: list[dict[str, Any]] = []
    skipped = 0
    for line in lines:
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            skipped += 1
            continue
        if isinstance(value, dict) and isinstance(value.get("type"), str) and value.get("type") != "session":
            raw.append(value)
        else:
            skipped += 1
    return raw, skipped


def _parse_file(data: bytes, path: Path) -> _ParsedFile:
    lines = _decode_lines(data)
    header = _parse_header(lines[0] if lines else None, path)
    raw, skipped = _raw_entries(lines[1:])
    version = header.get("version", 1)
    version = version if isinstance(version, int) else 1
    old_version = version if version < CURRENT_SESSION_VERSION else None
    if version < 2:
        _upgrade_v1(header, raw)
    if version < 3:
        _upgrade_v2(raw)
        header["version"] = CURRENT_SESSION_VERSION
    return _ParsedFile(header, raw, skipped, old_version)


def _typed_entries(raw: list[dict[str, Any]]) -> tuple[list[SessionEntry], int]:
    entries: list[SessionEntry] = []
    skipped = 0
    for value in raw:
        try:
            entries.append(parse_entry(value))
        except ValidationError:
            skipped += 1
    return entries, skipped


def _entries_in(data: bytes) -> tuple[list[SessionEntry], int]:
    """Typed entries of some version-3 entry lines, and how many lines were skipped."""
    raw, skipped = _raw_entries(_decode_lines(data))
    entries, unreadable = _typed_entries(raw)
    return entries, skipped + unreadable


def _json_line(data: Mapping[str, Any]) -> bytes:
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _line_id(line: bytes) -> str | None:
    try:
        value = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if isinstance(value, dict) and value.get("type") != "session" and isinstance(value.get("id"), str):
        return value["id"]
    return None


def _is_json_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def _header_model(header: dict[str, Any], path: Path) -> SessionHeader:
    try:
        return SessionHeader.model_validate(header)
    except ValidationError as exc:
        raise SessionFileError(f"{path} has an unreadable session header: {exc.errors()[0]['msg']}") from None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- the store -------------------------------------------------------------------------


# Per-file caches a store keeps (least recently used dropped first): a long-lived worker
# touches many sessions, and whatever is dropped is read again from the file when needed.
MAX_CACHED_INDEXES = 256
MAX_CACHED_SESSIONS = 16


@dataclass
class _LoadedFile:
    """Typed entries of the first `size` bytes of one file (which end at a newline)."""

    inode: int
    size: int
    header: SessionHeader
    entries: list[SessionEntry]
    skipped: int


@dataclass
class _IdIndex:
    """Ids of the entries in the first `size` bytes of one file (which end at a newline)."""

    inode: int
    size: int = 0
    ids: set[str] = field(default_factory=set)


class SessionStore:
    """Session files under `root`, one directory per working directory (pi's layout)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._indexes: dict[str, _IdIndex] = {}
        self._loaded: dict[str, _LoadedFile] = {}
        self._guard = threading.Lock()
        self._file_locks: dict[str, threading.Lock] = {}

    # --- naming ---------------------------------------------------------------------

    def session_dir_for(self, cwd: str | Path) -> Path:
        return self.root / session_dir_name(str(cwd))

    def new_session_path(self, cwd: str | Path, session_id: str, timestamp: str) -> Path:
        """Where a new session goes; `timestamp` is the header's ISO timestamp."""
        return self.session_dir_for(cwd) / session_file_name(session_id, timestamp)

    # --- locking --------------------------------------------------------------------

    def _thread_lock(self, path: Path) -> threading.Lock:
        with self._guard:
            return self._file_locks.setdefault(str(path.absolute()), threading.Lock())

    @contextlib.contextmanager
    def _locked(self, path: Path, exclusive: bool = True) -> Iterator[BinaryIO]:
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

    # --- writing --------------------------------------------------------------------

    def create(self, path: Path, header: SessionHeader | Mapping[str, Any]) -> None:
        """Write the header line of a new file. Creating again with the same header is a
        no-op (a retried activity); a different session already there is an error."""
        if not isinstance(header, SessionHeader):
            try:
                header = SessionHeader.model_validate(dict(header))
            except ValidationError as exc:
                raise ValueError(f"not a session header: {exc.errors()[0]['msg']}") from None
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.close(fd)
        except FileExistsError:
            pass
        with self._locked(path) as handle:
            existing = handle.read()
            first, newline, _ = existing.partition(b"\n")
            if existing.strip():
                try:
                    existing_header: dict[str, Any] | None = _parse_header(
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
            handle.write(_json_line(header.to_json_dict()))
            handle.flush()
            os.fsync(handle.fileno())
        _fsync_dir(path.parent)

    def append(self, path: Path, entries: Sequence[EntryBase | Mapping[str, Any]]) -> int:
        """Append the entries whose ids the file does not hold yet; returns how many were
        written. Dicts are checked as entries first (ValueError when one is not)."""
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
            prepared.append((str(data["id"]), _json_line(data)))

        try:
            return self._append_lines(path, prepared)
        except _NeedsUpgrade:
            self._upgrade_file(path)
            return self._append_lines(path, prepared)

    def has_entry(self, path: Path, entry_id: str) -> bool:
        """Whether the file holds an entry with this id (as read now, other writers included)."""
        try:
            return entry_id in self._locked_index(path).ids
        except _NeedsUpgrade:
            self._upgrade_file(path)
            return entry_id in self._locked_index(path).ids

    def _locked_index(self, path: Path) -> _IdIndex:
        with self._locked(path) as handle:
            return self._current_index(path, handle)

    def _append_lines(self, path: Path, prepared: list[tuple[str, bytes]]) -> int:
        with self._locked(path) as handle:
            index = self._current_index(path, handle)
            new_ids: list[str] = []
            lines: list[bytes] = []
            for entry_id, line in prepared:
                if entry_id not in index.ids and entry_id not in new_ids:
                    new_ids.append(entry_id)
                    lines.append(line)
            if lines:
                payload = b"".join(lines)
                # Straight to the descriptor: a buffered writer could flush leftovers later.
                fd = handle.fileno()
                try:
                    os.lseek(fd, index.size, os.SEEK_SET)
                    view = memoryview(payload)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                except OSError:
                    # A full disk can cut a line in half: give the file back its last
                    # whole line (truncating needs no space) so readers never see a torn one.
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, index.size)
                        os.fsync(fd)
                    raise
                # Only now: a failed write must leave the ids retryable.
                index.ids.update(new_ids)
                index.size += len(payload)
            return len(lines)

    def _current_index(self, path: Path, handle: BinaryIO) -> _IdIndex:
        """The id index brought up to date with the file's tail (other processes may have
        appended), after upgrading an old file and repairing a torn last line."""
        key = str(path.absolute())
        stat = os.fstat(handle.fileno())
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
            header = _parse_header(first.decode("utf-8", errors="replace"), path)
            version = header.get("version", 1)
            if not isinstance(version, int) or version < CURRENT_SESSION_VERSION:
                raise _NeedsUpgrade
        handle.seek(index.size)
        tail = handle.read()
        complete_end = tail.rfind(b"\n") + 1
        for line in tail[:complete_end].split(b"\n"):
            entry_id = _line_id(line)
            if entry_id is not None:
                index.ids.add(entry_id)
        index.size += complete_end
        torn = tail[complete_end:]
        if torn.strip():
            if _is_json_object(torn):
                # The line was written whole; only its newline was lost.
                handle.seek(index.size + len(torn))
                handle.write(b"\n")
                entry_id = _line_id(torn)
                if entry_id is not None:
                    index.ids.add(entry_id)
                index.size += len(torn) + 1
            else:
                handle.truncate(index.size)
            handle.flush()
            os.fsync(handle.fileno())
        elif torn:
            handle.truncate(index.size)
        return index

    # --- reading --------------------------------------------------------------------

    def load(self, path: Path) -> LoadedSession:
        """The whole file as typed entries and a tree whose leaf is the last entry.
        A version 1 or 2 file is upgraded on disk to version 3 first.

        Entries already read from this file are reused and only lines appended since are
        parsed, so loading a long session once per turn stays cheap; keep one store per
        process to benefit. Returned entries are shared with that cache: do not mutate them.
        """
        key = str(path.absolute())
        with self._locked(path, exclusive=False) as handle:
            stat = os.fstat(handle.fileno())
            with self._guard:
                cached = self._loaded.pop(key, None)
            if cached is not None and (cached.inode != stat.st_ino or stat.st_size < cached.size):
                cached = None
            handle.seek(cached.size if cached is not None else 0)
            data = handle.read()
        complete_end = data.rfind(b"\n") + 1
        if cached is None:
            if not data[:complete_end].strip():
                return self._load_whole(path, data)  # nothing but a torn header
            parsed = _parse_file(data[:complete_end], path)
            if parsed.old_version is not None:
                return self._load_whole(path, data)
            entries, unreadable = _typed_entries(parsed.raw_entries)
            cached = _LoadedFile(
                inode=stat.st_ino,
                size=complete_end,
                header=_header_model(parsed.header, path),
                entries=entries,
                skipped=parsed.skipped + unreadable,
            )
        else:
            new_entries, skipped = _entries_in(data[:complete_end])
            cached.entries.extend(new_entries)
            cached.skipped += skipped
            cached.size += complete_end
        with self._guard:
            self._loaded[key] = cached
            while len(self._loaded) > MAX_CACHED_SESSIONS:
                self._loaded.pop(next(iter(self._loaded)))
        # An unterminated last line (a crash, or a hand-edited file) is read but not cached.
        torn_entries, torn_skipped = _entries_in(data[complete_end:])
        entries = [*cached.entries, *torn_entries]
        return LoadedSession(
            path=path,
            header=cached.header,
            entries=entries,
            tree=SessionTree(entries),
            skipped_lines=cached.skipped + torn_skipped,
        )

    def _load_whole(self, path: Path, data: bytes) -> LoadedSession:
        parsed = _parse_file(data, path)
        if parsed.old_version is not None:
            parsed = self._upgrade_file(path)
        entries, unreadable = _typed_entries(parsed.raw_entries)
        return LoadedSession(
            path=path,
            header=_header_model(parsed.header, path),
            entries=entries,
            tree=SessionTree(entries),
            skipped_lines=parsed.skipped + unreadable,
            migrated_from=parsed.old_version,
        )

    def _upgrade_file(self, path: Path) -> _ParsedFile:
        with self._locked(path) as handle:
            parsed = _parse_file(handle.read(), path)
            if parsed.old_version is None:
                return parsed  # another process upgraded it meanwhile
            content = _json_line(parsed.header) + b"".join(_json_line(raw) for raw in parsed.raw_entries)
            fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".upgrade-", suffix=".tmp")
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
            _fsync_dir(path.parent)
            return parsed

    def read_header(self, path: Path) -> SessionHeader:
        try:
            with open(path, "rb") as handle:
                first = handle.readline().decode("utf-8", errors="replace")
        except OSError as exc:
            raise SessionFileError(f"Cannot read session file {path}: {exc}") from None
        return _header_model(_parse_header(first, path), path)

    # --- finding sessions -------------------------------------------------------------

    def _session_files(self, cwd: str | Path | None = None) -> list[Path]:
        directories = [self.session_dir_for(cwd)] if cwd is not None else self._project_dirs()
        files: list[Path] = []
        for directory in directories:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                files.extend(p for p in directory.iterdir() if p.suffix == ".jsonl" and p.is_file())
        return files

    def _project_dirs(self) -> list[Path]:
        try:
            return sorted(p for p in self.root.iterdir() if p.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _header_or_none(self, path: Path) -> SessionHeader | None:
        try:
            return self.read_header(path)
        except SessionFileError:
            return None

    def list_sessions(self, cwd: str | Path | None = None) -> list[SessionSummary]:
        """Sessions of one working directory, or of all when `cwd` is None; newest first."""
        summaries = [s for s in (_summarize(p) for p in self._session_files(cwd)) if s is not None]
        summaries.sort(key=lambda s: s.modified, reverse=True)
        return summaries

    def find_session(self, reference: str) -> Path:
        """A session file by path, full id or unique id prefix."""
        candidate = Path(reference).expanduser()
        if candidate.is_file():
            return candidate.absolute()
        if reference.endswith(".jsonl") or os.sep in reference:
            raise SessionNotFoundError(f"Session file {reference} does not exist")
        wanted = reference.strip().lower()
        if not wanted:
            raise SessionNotFoundError("No session id given")
        exact: list[Path] = []
        by_prefix: list[tuple[Path, str]] = []
        for path in self._session_files():
            header = self._header_or_none(path)
            if header is None:
                continue
            if header.id.lower() == wanted:
                exact.append(path)
            elif header.id.lower().startswith(wanted):
                by_prefix.append((path, header.id))
        if len(exact) == 1:
            return exact[0]
        if not exact and len(by_prefix) == 1:
            return by_prefix[0][0]
        matches = [(p, wanted) for p in exact] or by_prefix
        if not matches:
            raise SessionNotFoundError(f'No session matches "{reference}" (looked in {self.root})')
        listed = "\n".join(f"  {session_id}  {path}" for path, session_id in sorted(matches)[:10])
        more = f"\n  ... and {len(matches) - 10} more" if len(matches) > 10 else ""
        raise AmbiguousSessionError(
            f'"{reference}" matches {len(matches)} sessions; give more of the id:\n{listed}{more}'
        )

    def most_recent(self, cwd: str | Path) -> Path | None:
        """The session of `cwd` whose file changed last (for --continue)."""
        valid = [p for p in self._session_files(cwd) if self._header_or_none(p) is not None]
        return max(valid, key=lambda p: p.stat().st_mtime_ns, default=None)


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            block["text"]
            for block in content
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        )
    return ""


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _summarize(path: Path) -> SessionSummary | None:
    """A listing row read straight from the JSON (no typed parsing: listing must be quick)."""
    try:
        data = path.read_bytes()
        parsed = _parse_file(data, path)
        modified_fallback = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
    except (OSError, SessionFileError):
        return None
    header = parsed.header
    name: str | None = None
    message_count = 0
    first_message: str | None = None
    last_activity_ms: int | None = None
    for entry in parsed.raw_entries:
        if entry.get("type") == "session_info":
            name = str(entry.get("name") or "").strip() or None
        if entry.get("type") != "message" or not isinstance(entry.get("message"), dict):
            continue
        message_count += 1
        message = entry["message"]
        if message.get("role") not in ("user", "assistant"):
            continue
        if isinstance(message.get("timestamp"), int | float):
            last_activity_ms = max(last_activity_ms or 0, int(message["timestamp"]))
        if first_message is None and message.get("role") == "user":
            first_message = _message_text(message) or None
    created = _parse_time(header.get("timestamp")) or modified_fallback
    modified = datetime.fromtimestamp(last_activity_ms / 1000, tz=UTC) if last_activity_ms else created
    return SessionSummary(
        path=path.absolute(),
        id=str(header["id"]),
        cwd=str(header.get("cwd") or ""),
        name=name,
        parent_session=header.get("parentSession") if isinstance(header.get("parentSession"), str) else None,
        created=created,
        modified=modified,
        message_count=message_count,
        first_message=first_message,
    )
