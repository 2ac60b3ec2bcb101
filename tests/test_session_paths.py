"""Names from parties tempi does not trust never leave the session's side folder (issue 42):
a tool call's id is the model's choice and becomes a live file's name; a session id is read
from the session file's header and names the side folder."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from tempi.store.errors import SessionFileError
from tempi.store.live_channel import LiveReader, LiveWriter, remove_live_files
from tempi.store.session_store import SessionStore
from tempi.store.sidecar import live_path, pending_path, sidecar_dir
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json

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


def _crafted_session(path: Path, session_id: str) -> Path:
    header = {"type": "session", "version": 3, "id": session_id, "timestamp": "2026-11-21T04:49:58.913Z"}
    entry = {
        "type": "message",
        "id": "e1",
        "parentId": None,
        "timestamp": "2026-11-21T04:49:58.951Z",
        "message": {"role": "user", "content": "hi", "timestamp": 1795236598949},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n")
    return path


HOSTILE_SESSION_IDS = ["../../escape", "/tmp/x.service.d", "a/b", "..", ".hidden", "", "x" * 200, "a..b"]


@pytest.mark.parametrize("session_id", HOSTILE_SESSION_IDS)
def test_a_session_file_whose_id_is_a_path_is_refused_by_name(tmp_path: Path, session_id: str) -> None:
    store = SessionStore(tmp_path / "sessions")
    path = _crafted_session(tmp_path / "work" / "crafted.jsonl", session_id)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(SessionFileError) as raised:
        store.load_for_resume(path)
    assert str(path) in str(raised.value) and "session id" in str(raised.value)
    assert sorted(tmp_path.rglob("*")) == before  # nothing made, here or anywhere
    # Whoever asks for its side folder anyway gets one inside the hidden folder.
    folder = sidecar_dir(path, session_id)
    assert folder.parent == path.parent / ".tempi" and _inside(folder, path.parent / ".tempi")


def test_session_ids_as_pi_and_tempi_make_them_are_accepted(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    for n, session_id in enumerate([SESSION_ID, str(uuid.uuid4()), "s1", "abc_DEF.1-2"]):
        path = _crafted_session(tmp_path / "work" / f"{n}.jsonl", session_id)
        assert store.load_for_resume(path).header.id == session_id
        assert sidecar_dir(path, session_id).name == session_id


def test_the_cli_refuses_a_session_file_whose_id_is_a_path(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario("crafted-id", [{"text": "never asked"}])
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    write_models_json(home, scripted_server, "crafted-id")
    crafted = _crafted_session(tmp_path / "in" / "deep" / "crafted.jsonl", "../../escape")
    proc = run_tempi(
        ["--model", "mock/mock-model", "--session", str(crafted), "-p", "hi"],
        cwd=work,
        env=tempi_env(home, temporal_address),
    )
    assert proc.returncode != 0
    assert f"{crafted} cannot be continued" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "in" / "escape").exists() and not (tmp_path / "escape").exists()
    assert not (crafted.parent / ".tempi").exists()
