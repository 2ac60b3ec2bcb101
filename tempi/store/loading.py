"""Reading session files back as typed entries and a tree, through a per-process cache.

A session is loaded once per turn and only grows, so entries already parsed are reused and
only the lines appended since are read (a file replaced or truncated meanwhile, by an
upgrade or by hand, is read again whole). Loads hold a shared `flock`, so an append in
progress is never read half-written.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tempi.agent.session_entries import SessionEntry, SessionHeader
from tempi.agent.session_tree import SessionTree
from tempi.store.appends import upgrade_file
from tempi.store.file_format import entries_in, header_model, parse_file, typed_entries
from tempi.store.locking import FileLocks

# What a store keeps parsed, least recently used dropped first (whatever is dropped is read
# again whole when next loaded). A busy worker runs a hundred sessions or more at once, and
# a bound below that made each of their turns parse the whole file again; parsed entries
# take about 4.5 times the bytes of their lines, so the bytes bound keeps long sessions from
# filling memory. The session loaded last is always kept.
MAX_CACHED_SESSIONS = 256
MAX_CACHED_BYTES = 32 * 1024 * 1024


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
    # What the user should hear about the file (garbage lines, broken links, a copy given
    # its own id), each naming lines; filled by `SessionStore.load_for_resume` only.
    warnings: list[str] = field(default_factory=list)


@dataclass
class _LoadedFile:
    """Typed entries of the first `size` bytes of one file (which end at a newline)."""

    inode: int
    size: int
    header: SessionHeader
    entries: list[SessionEntry]
    skipped: int
    # Kept with the entries and extended with them: indexing every entry again per load, and
    # the tree's last built context, would make each turn cost the whole session.
    tree: SessionTree


class Loader:
    """Loads session files, keeping the parsed entries of the most recently loaded ones."""

    def __init__(
        self, locks: FileLocks, max_sessions: int = MAX_CACHED_SESSIONS, max_bytes: int = MAX_CACHED_BYTES
    ) -> None:
        self._locks = locks
        self._max_sessions = max_sessions
        self._max_bytes = max_bytes
        self._loaded: dict[str, _LoadedFile] = {}
        self._loaded_bytes = 0  # the sum of the cached files' sizes
        self._guard = threading.Lock()

    def load(self, path: Path) -> LoadedSession:
        """The whole file as typed entries and a tree whose leaf is the last entry.
        A version 1 or 2 file is upgraded on disk to version 3 first.

        Entries already read from this file are reused and only lines appended since are
        parsed, so loading a long session once per turn stays cheap; keep one store per
        process to benefit. Returned entries and tree are shared with that cache: do not
        mutate them.
        """
        key = str(path.absolute())
        with self._locks.locked(path, exclusive=False) as handle:
            stat = os.fstat(handle.fileno())
            with self._guard:
                cached = self._loaded.pop(key, None)
                if cached is not None:
                    self._loaded_bytes -= cached.size
            if cached is not None and (cached.inode != stat.st_ino or stat.st_size < cached.size):
                cached = None
            handle.seek(cached.size if cached is not None else 0)
            data = handle.read()
        complete_end = data.rfind(b"\n") + 1
        if cached is None:
            if not data[:complete_end].strip():
                return self._load_whole(path, data)  # nothing but a torn header
            parsed = parse_file(data[:complete_end], path)
            if parsed.old_version is not None:
                return self._load_whole(path, data)
            entries, unreadable = typed_entries(parsed.raw_entries)
            cached = _LoadedFile(
                inode=stat.st_ino,
                size=complete_end,
                header=header_model(parsed.header, path),
                entries=entries,
                skipped=parsed.skipped + unreadable,
                tree=SessionTree(entries),
            )
        else:
            new_entries, skipped = entries_in(data[:complete_end])
            cached.entries.extend(new_entries)
            for entry in new_entries:
                cached.tree.add_loaded(entry)
            cached.skipped += skipped
            cached.size += complete_end
        self._keep(key, cached)
        # An unterminated last line (a crash, or a hand-edited file) is read but not cached.
        torn_entries, torn_skipped = entries_in(data[complete_end:])
        entries = [*cached.entries, *torn_entries]
        return LoadedSession(
            path=path,
            header=cached.header,
            entries=entries,
            tree=SessionTree(entries) if torn_entries else cached.tree,
            skipped_lines=cached.skipped + torn_skipped,
        )

    def _keep(self, key: str, loaded: _LoadedFile) -> None:
        with self._guard:
            # Two threads may have loaded the same file at once; the last one's parse is kept.
            replaced = self._loaded.pop(key, None)
            if replaced is not None:
                self._loaded_bytes -= replaced.size
            self._loaded[key] = loaded
            self._loaded_bytes += loaded.size
            while len(self._loaded) > 1 and (
                len(self._loaded) > self._max_sessions or self._loaded_bytes > self._max_bytes
            ):
                self._loaded_bytes -= self._loaded.pop(next(iter(self._loaded))).size

    def read_locked(self, path: Path) -> bytes:
        """The whole file as it is between two appends."""
        with self._locks.locked(path, exclusive=False) as handle:
            return handle.read()

    def _load_whole(self, path: Path, data: bytes) -> LoadedSession:
        parsed = parse_file(data, path)
        if parsed.old_version is not None:
            parsed = upgrade_file(self._locks, path)
        entries, unreadable = typed_entries(parsed.raw_entries)
        return LoadedSession(
            path=path,
            header=header_model(parsed.header, path),
            entries=entries,
            tree=SessionTree(entries),
            skipped_lines=parsed.skipped + unreadable,
            migrated_from=parsed.old_version,
        )
