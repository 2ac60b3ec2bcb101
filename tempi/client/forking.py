"""Forking a session: a new file holding one branch of another, linked back to it."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from tempi.agent.session_entries import LabelEntry, SessionHeader
from tempi.agent.session_tree import UnknownEntryError
from tempi.store.catalog import session_file_name
from tempi.store.session_store import SessionStore


def iso_now() -> str:
    """A session header's timestamp: pi's ISO form with milliseconds."""
    ms = int(time.time() * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(ms / 1000)) + f"{ms % 1000:03d}Z"


def fork_session_file(
    store: SessionStore,
    source: Path,
    leaf_id: str | None,
    *,
    session_dir: Path | None = None,
) -> Path:
    """Copy the branch ending at `leaf_id` (None: no entries) into a new session file whose
    header names `source` as its parent. Entry ids are kept, so they still match."""
    loaded = store.load(source)
    entries = []
    if leaf_id is not None:
        try:
            entries = [e for e in loaded.tree.path_to(leaf_id) if not isinstance(e, LabelEntry)]
        except UnknownEntryError as err:
            raise ValueError(f"Entry {leaf_id} is not in session {loaded.header.id}") from err
    session_id = str(uuid.uuid4())
    created = iso_now()
    cwd = loaded.header.cwd
    if session_dir is not None:
        path = session_dir / session_file_name(session_id, created)
    elif source.parent.parent == store.root:
        path = store.new_session_path(cwd, session_id, created)
    else:
        # A file kept outside the store (--session-dir): its fork sits beside it.
        path = source.parent / session_file_name(session_id, created)
    header = SessionHeader(id=session_id, timestamp=created, cwd=cwd, parent_session=str(source))
    store.create(path, header)
    if entries:
        store.append(path, entries)
    return path
