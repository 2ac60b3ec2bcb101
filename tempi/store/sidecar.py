"""Where a session keeps its working files next to the JSONL: parked tool results waiting
to be committed in order, and live streaming deltas for watchers.

They sit in a hidden folder beside the session file, so any worker or client that sees
the session store sees them too. They hold tool output and model text, so that folder is
private to its owner (0700), whoever writes there first and whatever the umask.

File names here come from parties tempi does not trust: a tool call's id is the model's
choice, and a session id is read from the session file's header. A name that is not plainly
safe is replaced by a hash of itself (`safe_key`, `safe_session_dir_name`), so the same name
always maps to the same file, writers and readers agree, and no name leaves the folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from pathlib import Path

from tempi.store.modes import make_private_dirs

SIDECAR_ROOT = ".tempi"

# A key used as a file name as it is: tool-call ids of the common providers, entry ids.
_SAFE_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
# A session id used as a folder name as it is (pi's ids are UUIDs).
_SAFE_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# Hashed names start with a character plain names never have, so the two never meet.
_HASHED_PREFIX = "~"


def _hashed(name: str) -> str:
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return _HASHED_PREFIX + digest[:40]


def safe_key(key: str) -> str:
    """`key` as a file name: itself when it is a plain name, else a hash of it."""
    return key if _SAFE_KEY.fullmatch(key) else _hashed(key)


def is_safe_session_id(session_id: str) -> bool:
    """Whether a session id (a session file's header `id`) may name a folder as it is."""
    return bool(_SAFE_SESSION_ID.fullmatch(session_id)) and ".." not in session_id


def safe_session_dir_name(session_id: str) -> str:
    return session_id if is_safe_session_id(session_id) else _hashed(session_id)


def sidecar_dir(session_path: str | Path, session_id: str) -> Path:
    """The session's folder; the hidden folder above it exists (private) once this returns,
    so anything created beneath, by any writer, is out of other users' reach."""
    root = Path(session_path).parent / SIDECAR_ROOT
    if not root.is_dir():
        # A folder that cannot be made here surfaces as the writer's own error.
        with contextlib.suppress(OSError):
            make_private_dirs(root)
    return root / safe_session_dir_name(session_id)


def pending_path(session_path: str | Path, session_id: str, entry_id: str) -> Path:
    return sidecar_dir(session_path, session_id) / "pending" / f"{safe_key(entry_id)}.json"


def live_dir(session_path: str | Path, session_id: str) -> Path:
    return sidecar_dir(session_path, session_id) / "live"


def live_path(session_path: str | Path, session_id: str, key: str) -> Path:
    """The live file of an LLM call (keyed by its entry id) or a tool call (by the model's
    call id); writers, the flush that removes it and watchers all find it here."""
    return live_dir(session_path, session_id) / f"{safe_key(key)}.jsonl"


def started_path(session_path: str | Path, session_id: str, entry_id: str) -> Path:
    """The mark a command leaves as it starts inside a workflow task (keyed by its result's
    entry id): a run of the same task after a lost worker finds it and does not run it again."""
    return sidecar_dir(session_path, session_id) / "started" / safe_key(entry_id)


def shared_events_dir(session_path: str | Path, session_id: str) -> Path:
    """Where watchers on this machine share one stream of the session's log events (one
    file and one lock per workflow chain: a restarted workflow counts offsets from 0 again)."""
    return sidecar_dir(session_path, session_id) / "events"
