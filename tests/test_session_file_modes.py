"""Session folders and files get their modes from tempi, not the umask, and tempi never
appends to a session file that another user owns (issue 42): with umask 000 a missing
`sessionDir` was made 0777, another user swapped in their own 0666 file, and the owner's
next turn went into it."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tempi.agent.session_entries import SessionHeader
from tempi.store.errors import SessionFileError
from tempi.store.live_channel import LiveWriter
from tempi.store.session_store import SessionStore
from tempi.store.sidecar import live_path, pending_path, sidecar_dir

SESSION_ID = "0199aaaa-0000-7000-8000-00000000000a"
HEADER = SessionHeader(id=SESSION_ID, timestamp="2026-11-21T04:49:58.913Z", cwd="/w")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _entry(entry_id: str, parent: str | None) -> dict[str, object]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-11-21T04:49:58.951Z",
        "message": {"role": "user", "content": entry_id, "timestamp": 1795236598949},
    }


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o277])
def test_session_folders_and_files_are_private_whatever_the_umask(tmp_path: Path, mask: int) -> None:
    from tempi.activities.parked_results import park_entry
    from tempi.workflows.activity_payloads import SessionFileRef

    session_dir = tmp_path / "a" / "b" / "sessions"  # a sessionDir none of whose folders exist
    path = session_dir / "s.jsonl"
    with _umask(mask):
        store = SessionStore(tmp_path / "home" / "sessions")
        store.create(path, HEADER)
        store.append(path, [_entry("e1", None)])
        live = LiveWriter(live_path(path, SESSION_ID, "call_1"), attempt=1)
        live.write({"delta": "secret"})
        live.close()
        ref = SessionFileRef.model_construct(session_path=str(path), session_id=SESSION_ID)
        park_entry(ref, _entry("e2", "e1"))
    for folder in (tmp_path / "a", tmp_path / "a" / "b", session_dir, sidecar_dir(path, SESSION_ID).parent):
        assert _mode(folder) == 0o700, folder
    for folder in (sidecar_dir(path, SESSION_ID), pending_path(path, SESSION_ID, "e2").parent):
        assert _mode(folder) == 0o700, folder
    assert _mode(path) == 0o600
    assert _mode(live_path(path, SESSION_ID, "call_1")) == 0o600
    assert _mode(pending_path(path, SESSION_ID, "e2")) == 0o600


def _give_away(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `path` another user's: chown as root, else pretend to be another uid."""
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
    else:
        real = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: real + 1)


def test_a_session_file_of_another_user_is_never_appended_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(tmp_path / "home" / "sessions")
    path = tmp_path / "sessions" / "s.jsonl"
    store.create(path, HEADER)
    store.append(path, [_entry("e1", None)])
    # Another user replaces the file with their own, open to everyone.
    swapped = path.with_name("theirs.jsonl")
    swapped.write_bytes(path.read_bytes())
    swapped.chmod(0o666)
    os.replace(swapped, path)
    _give_away(path, monkeypatch)
    before = path.read_bytes()

    with pytest.raises(SessionFileError) as raised:
        store.append(path, [_entry("e2", "e1")])
    assert str(path) in str(raised.value) and "another user" in str(raised.value)
    with pytest.raises(SessionFileError):
        store.create(path, HEADER)
    with pytest.raises(SessionFileError) as raised:
        SessionStore(tmp_path / "home" / "sessions").load_for_resume(path)
    assert str(path) in str(raised.value) and "another user" in str(raised.value)
    assert path.read_bytes() == before
