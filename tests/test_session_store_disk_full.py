"""A full disk mid-append leaves the session file with whole lines only."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from tempi.store import appends as store_module
from tempi.store.session_store import SessionStore


def _entry(entry_id: str, parent: str | None) -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-11-21T00:00:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "x" * 200}], "timestamp": 0},
    }


def test_a_write_cut_short_by_a_full_disk_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(tmp_path)
    path = tmp_path / "s.jsonl"
    store.create(
        path,
        {"type": "session", "version": 3, "id": "sess", "timestamp": "2026-11-21T00:00:00.000Z", "cwd": "/w"},
    )
    store.append(path, [_entry("aaaa0001", None)])
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        if len(data) > 50:
            real_write(fd, bytes(data[:50]))  # the disk takes part of the line...
            return 50
        raise OSError(errno.ENOSPC, "No space left on device")  # ...then is full

    monkeypatch.setattr(store_module.os, "write", half_then_full)
    with pytest.raises(OSError):
        store.append(path, [_entry("aaaa0002", "aaaa0001")])
    monkeypatch.undo()

    lines = path.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["sess", "aaaa0001"]  # no torn line
    # Once there is space again, the same append goes through, exactly once.
    assert store.append(path, [_entry("aaaa0002", "aaaa0001")]) == 1
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == [
        "sess",
        "aaaa0001",
        "aaaa0002",
    ]
