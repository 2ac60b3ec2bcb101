"""Writing the entries a workflow issued (its outbox) to the session file, in order, with
the tool results parked beside it."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from tempi.store.session_store import SessionStore
from tempi.store.sidecar import pending_path
from tempi.workflows.activity_payloads import OutboxItem, SessionFileRef


def _now_iso() -> str:
    ms = int(time.time() * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(ms / 1000)) + f"{ms % 1000:03d}Z"


def ensure_session_file(store: SessionStore, ref: SessionFileRef) -> None:
    path = Path(ref.session_path)
    if path.exists():
        return
    header: dict[str, Any] = {
        "type": "session",
        "version": 3,
        "id": ref.session_id,
        "timestamp": ref.header_timestamp or _now_iso(),
        "cwd": ref.cwd,
    }
    if ref.parent_session:
        header["parentSession"] = ref.parent_session
    store.create(path, header)


def write_outbox(store: SessionStore, ref: SessionFileRef, outbox: list[OutboxItem]) -> None:
    """Append the outbox in order, pulling parked tool results; safe to repeat."""
    for blob in append_outbox(store, ref, outbox, durable=True):
        with contextlib.suppress(FileNotFoundError):
            blob.unlink()


def append_outbox(
    store: SessionStore, ref: SessionFileRef, outbox: list[OutboxItem], *, durable: bool
) -> list[Path]:
    """Append the outbox in order; returns the parked results it took in, whose files may
    go once the lines are durable."""
    if not outbox:
        return []
    ensure_session_file(store, ref)
    entries: list[dict[str, Any]] = []
    parked: list[Path] = []
    for item in outbox:
        if item.entry is not None:
            entries.append(item.entry)
            continue
        assert item.pending_id is not None
        blob = pending_path(ref.session_path, ref.session_id, item.pending_id)
        try:
            entries.append(json.loads(blob.read_text(encoding="utf-8")))
            parked.append(blob)
        except FileNotFoundError:
            if not store.has_entry(Path(ref.session_path), item.pending_id):
                raise RuntimeError(
                    f"tool result {item.pending_id} was neither parked nor written to {ref.session_path}"
                ) from None
    store.append(Path(ref.session_path), entries, durable=durable)
    return parked
