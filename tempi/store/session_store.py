"""Session files on disk: pi's JSONL format, version 3, one entry per line.

Appends are idempotent by entry id: the workflow makes every id, so a retried append
activity writes nothing twice. Each append holds an exclusive `flock` on the file,
repairs a line torn by a crash, and is fsynced before it returns. Files written by pi
(versions 1 and 2 included) load; old versions are upgraded in place on first touch.

`SessionStore` is the one object callers hold: it shares one set of file locks between
its writer (`appends`) and its reader (`loading`), whose caches last as long as the store,
so keep one store per process.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tempi.agent.session_entries import EntryBase, SessionHeader
from tempi.store import catalog, file_format
from tempi.store.appends import Appender, refuse_foreign, rewrite_header
from tempi.store.catalog import SessionSummary
from tempi.store.errors import SessionFileError
from tempi.store.loading import LoadedSession, Loader
from tempi.store.locking import FileLocks
from tempi.store.sidecar import is_safe_session_id


class SessionStore:
    """Session files under `root`, one directory per working directory (pi's layout).
    New sessions go under `root`; those under `also_read` (pi's `sessions/`) are listed,
    found and continued in place as well."""

    def __init__(self, root: Path, *also_read: Path) -> None:
        self.root = root
        self.roots = [root, *(other for other in also_read if other != root)]
        self._locks = FileLocks()
        self._appender = Appender(self._locks)
        self._loader = Loader(self._locks)

    # --- naming ---------------------------------------------------------------------

    def session_dir_for(self, cwd: str | Path) -> Path:
        return catalog.session_dir_for(self.root, cwd)

    def new_session_path(self, cwd: str | Path, session_id: str, timestamp: str) -> Path:
        """Where a new session goes; `timestamp` is the header's ISO timestamp."""
        return self.session_dir_for(cwd) / catalog.session_file_name(session_id, timestamp)

    # --- writing --------------------------------------------------------------------

    def create(self, path: Path, header: SessionHeader | Mapping[str, Any]) -> None:
        """Write the header line of a new file. Creating again with the same header is a
        no-op (a retried activity); a different session already there is an error."""
        self._appender.create(path, header)

    def append(
        self, path: Path, entries: Sequence[EntryBase | Mapping[str, Any]], *, durable: bool = True
    ) -> int:
        """Append the entries whose ids the file does not hold yet; returns how many were
        written. Dicts are checked as entries first (ValueError when one is not).
        `durable=False` leaves the fsync to the file's next durable append or `sync`."""
        return self._appender.append(path, entries, durable=durable)

    def sync(self, path: Path) -> None:
        """Make durable what a `durable=False` append left in the file."""
        self._appender.sync(path)

    def has_entry(self, path: Path, entry_id: str) -> bool:
        """Whether the file holds an entry with this id (as read now, other writers included)."""
        return self._appender.has_entry(path, entry_id)

    # --- reading --------------------------------------------------------------------

    def load(self, path: Path) -> LoadedSession:
        """The whole file as typed entries and a tree whose leaf is the last entry.
        A version 1 or 2 file is upgraded on disk to version 3 first. Returned entries are
        shared with the store's cache: do not mutate them."""
        return self._loader.load(path)

    def load_for_resume(self, path: Path) -> LoadedSession:
        """`load` for a session about to be continued, with `warnings` for the user: lines
        that are not entries, repeated ids and parentIds naming no entry, by line number.

        A copy of another session's file (same header id, another file under the roots) gets a
        new session id in its header first: the id names the workflow and the side files,
        so a copy keeping it would have its turns written to the original.

        A header id that is not a session id (a path, `..`, an empty name) raises
        SessionFileError naming the file: the id names the side folder, so such a file
        could make tempi write where it says."""
        refuse_foreign(path, path.stat().st_uid)  # its turns would be appended to it
        loaded = self.load(path)
        if not is_safe_session_id(loaded.header.id):
            raise SessionFileError(
                f"{path} cannot be continued: its header's session id {loaded.header.id[:200]!r} is not "
                "a session id (letters, digits, '-', '_' and '.', at most 128, no '/' or '..'; "
                "pi's ids are UUIDs)"
            )
        warnings: list[str] = []
        original = catalog.other_file_with_id(self.roots, path, loaded.header)
        if original is not None:
            old_id = loaded.header.id
            new_id = str(uuid.uuid4())
            first_line = self._loader.read_locked(path).partition(b"\n")[0]
            header = {**json.loads(first_line), "id": new_id}
            if rewrite_header(self._locks, path, old_id, header):
                warnings.append(
                    f"{path} is a copy of session {old_id} ({original}); "
                    f"it continues as a session of its own, {new_id}, so the original is left alone"
                )
            loaded = self.load(path)
        if loaded.skipped_lines or _links_broken(loaded):
            problems = file_format.file_problems(self._loader.read_locked(path))
            warnings.extend(f"{path}: {problem}" for problem in problems)
        loaded.warnings = warnings
        return loaded

    def read_header(self, path: Path) -> SessionHeader:
        return file_format.read_header(path)

    # --- finding sessions -------------------------------------------------------------

    def list_sessions(self, cwd: str | Path | None = None) -> list[SessionSummary]:
        """Sessions of one working directory, or of all when `cwd` is None; newest first."""
        return catalog.list_sessions(self.roots, cwd)

    def find_session(self, reference: str, session_dir: Path | None = None) -> Path:
        """A session file by path, full id or unique id prefix; a `sessionDir`'s sessions
        are looked at first, as in pi."""
        if session_dir is not None and (found := catalog.find_session_in(session_dir, reference)):
            return found
        return catalog.find_session(self.roots, reference)

    def most_recent(self, cwd: str | Path) -> Path | None:
        """The session of `cwd` whose file changed last (for --continue)."""
        return catalog.most_recent(self.roots, cwd)


def _links_broken(loaded: LoadedSession) -> bool:
    """Whether some id repeats, some parentId names no entry, or parentIds loop (cheap: no
    file reading)."""
    parent_of = {entry.id: entry.parent_id for entry in loaded.entries}
    return (
        len(parent_of) != len(loaded.entries)
        or any(parent is not None and parent not in parent_of for parent in parent_of.values())
        or bool(file_format.parent_cycles(parent_of))
    )
