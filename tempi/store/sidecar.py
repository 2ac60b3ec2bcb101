"""Where a session keeps its working files next to the JSONL: parked tool results waiting
to be committed in order, and live streaming deltas for watchers.

They sit in a hidden folder beside the session file, so any worker or client that sees
the session store sees them too.
"""

from __future__ import annotations

from pathlib import Path


def sidecar_dir(session_path: str | Path, session_id: str) -> Path:
    return Path(session_path).parent / ".tempi" / session_id


def pending_path(session_path: str | Path, session_id: str, entry_id: str) -> Path:
    return sidecar_dir(session_path, session_id) / "pending" / f"{entry_id}.json"


def live_path(session_path: str | Path, session_id: str, key: str) -> Path:
    return sidecar_dir(session_path, session_id) / "live" / f"{key}.jsonl"
