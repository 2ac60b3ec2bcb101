"""The marker of how much of a session file tempi has accounted for (the line pi's turns are
told apart by), kept as an append-only log beside the file, and the live files of tool calls
that stream nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tempi.store import known_end
from tempi.store.known_end import (
    LEGACY_MARKER_NAME,
    MARKER_LOG_BYTES,
    KnownEnd,
    marker_path,
    read_marker,
    write_marker,
)
from tempi.store.live_channel import LiveReader, LiveWriter
from tempi.store.sidecar import live_path

SESSION_ID = "s-1"


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    path = tmp_path / "session.jsonl"
    path.write_text('{"type":"session","id":"s-1"}\n' + "".join(f'{{"id":"e{i}"}}\n' for i in range(50)))
    return path


def _known(path: Path, size: int, own: list[str] | None = None) -> KnownEnd:
    return KnownEnd(inode=path.stat().st_ino, size=size, own=own or [])


def test_the_newest_record_is_in_force_across_the_log_starting_again(session_file: Path) -> None:
    size = session_file.stat().st_size
    for n in range(2000):
        write_marker(session_file, SESSION_ID, _known(session_file, n % size, [f"own-{n}"]))
        if n % 97 == 0:
            assert read_marker(session_file, SESSION_ID) == _known(session_file, n % size, [f"own-{n}"])
    assert read_marker(session_file, SESSION_ID) == _known(session_file, 1999 % size, ["own-1999"])
    log = marker_path(session_file, SESSION_ID)
    # 2,000 records would be ~100 KB: the log started again from its last record instead.
    assert log.stat().st_size <= MARKER_LOG_BYTES + 200
    assert oct(log.stat().st_mode & 0o777) == oct(0o600)
    assert not list(log.parent.glob("*.tmp"))


def test_a_line_still_being_written_is_passed_over(session_file: Path) -> None:
    write_marker(session_file, SESSION_ID, _known(session_file, 40))
    log = marker_path(session_file, SESSION_ID)
    with open(log, "ab") as out:
        out.write(b'{"inode": 1, "si')  # another writer's line, not finished yet
    assert read_marker(session_file, SESSION_ID) == _known(session_file, 40)
    # A line cut short by a full disk, then a whole one after it: the whole one before both counts.
    with open(log, "ab") as out:
        out.write(b'{"inode": 2, "size": 5, "own": []}\n')
    assert read_marker(session_file, SESSION_ID) == _known(session_file, 40)
    write_marker(session_file, SESSION_ID, _known(session_file, 80))
    assert read_marker(session_file, SESSION_ID) == _known(session_file, 80)


def test_a_short_write_is_a_full_disk(session_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_marker(session_file, SESSION_ID, _known(session_file, 40))
    real_write = os.write
    monkeypatch.setattr(known_end.os, "write", lambda fd, data: real_write(fd, data[:7]))
    with pytest.raises(OSError) as err:
        write_marker(session_file, SESSION_ID, _known(session_file, 90))
    assert err.value.errno == 28  # ENOSPC: the activity turns it into "free some space"
    monkeypatch.undo()
    assert read_marker(session_file, SESSION_ID) == _known(session_file, 40)


def test_the_marker_of_an_older_tempi_is_read_until_the_log_replaces_it(session_file: Path) -> None:
    legacy = marker_path(session_file, SESSION_ID).with_name(LEGACY_MARKER_NAME)
    legacy.parent.mkdir(parents=True, exist_ok=True)
    legacy.write_text(json.dumps({"inode": session_file.stat().st_ino, "size": 33, "own": ["x"]}))
    assert read_marker(session_file, SESSION_ID) == _known(session_file, 33, ["x"])
    write_marker(session_file, SESSION_ID, _known(session_file, 60))
    assert read_marker(session_file, SESSION_ID) == _known(session_file, 60)
    # An older tempi reading only the old file must not act on what is no longer true.
    assert not legacy.exists()


def test_a_replaced_or_shortened_session_file_has_no_marker(session_file: Path) -> None:
    write_marker(session_file, SESSION_ID, _known(session_file, session_file.stat().st_size))
    session_file.write_text(session_file.read_text()[:100])  # cut shorter than the marker says
    assert read_marker(session_file, SESSION_ID) is None
    write_marker(session_file, SESSION_ID, _known(session_file, 50))
    replacement = session_file.with_suffix(".new")
    replacement.write_text(session_file.read_text())
    os.replace(replacement, session_file)  # another inode
    assert read_marker(session_file, SESSION_ID) is None


def test_a_tool_call_that_streams_nothing_leaves_no_live_file(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    quiet = LiveWriter(live_path(session, SESSION_ID, "call-quiet"), attempt=1)
    quiet.close()
    assert not live_path(session, SESSION_ID, "call-quiet").exists()
    assert LiveReader(live_path(session, SESSION_ID, "call-quiet")).read_new() == ([], False)

    streaming = LiveWriter(live_path(session, SESSION_ID, "call-bash"), attempt=2)
    reader = LiveReader(live_path(session, SESSION_ID, "call-bash"))
    assert reader.read_new() == ([], False)
    streaming.write({"partialResult": {"content": [{"type": "text", "text": "building"}]}})
    streaming.write({"partialResult": {"content": [{"type": "text", "text": "built"}]}})
    streaming.close()
    items, restarted = reader.read_new()
    assert [i["partialResult"]["content"][0]["text"] for i in items] == ["building", "built"]
    assert not restarted
