"""Where a session keeps its working files next to the JSONL: parked tool results waiting
to be committed in order, and live streaming deltas for watchers.

They sit in a hidden folder beside the session file, so any worker or client that sees
the session store sees them too. They hold tool output and model text, so that folder is
private to its owner (0700), whoever writes there first and whatever the umask.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from tempi.store.modes import PRIVATE_DIR_MODE

SIDECAR_ROOT = ".tempi"


def sidecar_dir(session_path: str | Path, session_id: str) -> Path:
    """The session's folder; the hidden folder above it exists (private) once this returns,
    so anything created beneath, by any writer, is out of other users' reach."""
    root = Path(session_path).parent / SIDECAR_ROOT
    if not root.is_dir():
        # A folder that cannot be made here surfaces as the writer's own error.
        with contextlib.suppress(OSError):
            root.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    return root / session_id


def pending_path(session_path: str | Path, session_id: str, entry_id: str) -> Path:
    return sidecar_dir(session_path, session_id) / "pending" / f"{entry_id}.json"


def live_path(session_path: str | Path, session_id: str, key: str) -> Path:
    return sidecar_dir(session_path, session_id) / "live" / f"{key}.jsonl"
