"""Names from parties tempi does not trust never leave the session's side folder (issue 42):
a tool call's id is the model's choice and becomes a live file's name; a session id is read
from the session file's header and names the side folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tempi.store.live_channel import LiveReader, LiveWriter, remove_live_files
from tempi.store.sidecar import live_path, pending_path, sidecar_dir

SESSION_ID = "0199aaaa-0000-7000-8000-00000000000a"

HOSTILE_KEYS = [
    "../../victim",
    "../other-session/live/call_1",
    "/etc/passwd",
    "a/b",
    "..",
    ".",
    "",
    "call_1|fc_2",
    "x" * 300,
    "call\x00nul",
    "\udcff",
]


def _inside(path: Path, folder: Path) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep)


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_a_tool_call_id_never_leaves_the_live_folder(tmp_path: Path, key: str) -> None:
    session = tmp_path / "sessions" / "s.jsonl"
    live_dir = sidecar_dir(session, SESSION_ID) / "live"
    path = live_path(session, SESSION_ID, key)
    assert path.parent == live_dir and _inside(path, live_dir)
    assert path == live_path(session, SESSION_ID, key)  # the same id, the same file
    pending = pending_path(session, SESSION_ID, key)
    assert pending.parent == sidecar_dir(session, SESSION_ID) / "pending"


def test_distinct_ids_get_distinct_files_and_plain_ids_keep_their_names(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    names = {live_path(session, SESSION_ID, key).name for key in [*HOSTILE_KEYS, "call_1", "toolu_01AbC-x"]}
    assert len(names) == len(HOSTILE_KEYS) + 2
    assert live_path(session, SESSION_ID, "call_1").name == "call_1.jsonl"
    assert live_path(session, SESSION_ID, "toolu_01AbC-x").name == "toolu_01AbC-x.jsonl"


def test_a_hostile_id_neither_creates_nor_deletes_files_elsewhere(tmp_path: Path) -> None:
    """A model that calls a tool with id `../../<other>/live/<call>` wrote and then deleted
    another session's live file."""
    session = tmp_path / "sessions" / "s.jsonl"
    other = sidecar_dir(session, "other-session") / "live" / "call_1.jsonl"
    other.parent.mkdir(parents=True)
    other.write_text('{"attempt": 1, "delta": "theirs"}\n')
    victim = tmp_path / "sessions" / "victim.jsonl"
    for key in ["../../other-session/live/call_1", "../../../victim"]:
        writer = LiveWriter(live_path(session, SESSION_ID, key), attempt=1)
        writer.write({"delta": "ours"})
        writer.close()
        # A watcher finds what the writer wrote, by the same id.
        items, _ = LiveReader(live_path(session, SESSION_ID, key)).read_new()
        assert items == [{"delta": "ours"}]
    assert other.read_text() == '{"attempt": 1, "delta": "theirs"}\n'
    assert not victim.exists()
    victim.write_text("keep me\n")
    remove_live_files(
        [
            live_path(session, SESSION_ID, key)
            for key in ["../../other-session/live/call_1", "../../../victim"]
        ]
    )
    assert other.exists() and victim.exists()
    assert list((sidecar_dir(session, SESSION_ID) / "live").iterdir()) == []
