"""Continuing a session file says what is wrong with it, line by line, and a copy of another
session's file becomes a session of its own instead of writing to the original."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from tempi.agent.messages import UserMessage
from tempi.agent.session_entries import MessageEntry, SessionHeader
from tempi.store.session_store import SessionStore
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json

CWD = "/home/user/project"


def _entry(entry_id: str, parent: str | None) -> MessageEntry:
    return MessageEntry(
        id=entry_id,
        parent_id=parent,
        timestamp="2026-11-21T04:49:58.951Z",
        message=UserMessage(content=[{"type": "text", "text": entry_id}], timestamp=1795236598949),
    )


def _session(store: SessionStore, session_id: str = "0199aaaa-0000-7000-8000-00000000000a") -> Path:
    header = SessionHeader(id=session_id, timestamp="2026-11-21T04:49:58.913Z", cwd=CWD)
    path = store.new_session_path(CWD, header.id, header.timestamp)
    store.create(path, header)
    return path


def test_garbage_lines_broken_links_and_repeated_ids_are_named_by_line(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    path = _session(store)
    store.append(path, [_entry("e1", None), _entry("e2", "e1")])  # lines 2, 3
    with path.open("a") as handle:
        handle.write("this is not json\n")  # line 4
        handle.write(_entry("e3", "nowhere").to_json() + "\n")  # line 5
        handle.write(_entry("e2", "e1").to_json() + "\n")  # line 6
        handle.write('{"type": "message"}\n')  # line 7
    warnings = store.load_for_resume(path).warnings
    assert len(warnings) == 3, warnings
    assert "lines 4, 7 are not session entries" in warnings[0]
    assert "line 6 repeats the id 'e2' of line 3" in warnings[1]
    assert "line 5: parentId names no entry" in warnings[2]
    assert all(str(path) in warning for warning in warnings)


def test_a_sound_file_has_no_warnings(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    path = _session(store)
    store.append(path, [_entry("e1", None), _entry("e2", "e1")])
    loaded = store.load_for_resume(path)
    assert loaded.warnings == []
    assert loaded.header.id == "0199aaaa-0000-7000-8000-00000000000a"


def test_a_copy_gets_its_own_session_id_and_the_original_keeps_its_own(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    original = _session(store)
    store.append(original, [_entry("e1", None)])
    before = original.read_bytes()
    copy = tmp_path / "copy.jsonl"
    shutil.copy(original, copy)
    twin = original.parent / "twin.jsonl"  # a copy beside it, in the store itself
    shutil.copy(original, twin)

    loaded = store.load_for_resume(copy)
    assert loaded.header.id != "0199aaaa-0000-7000-8000-00000000000a"
    assert [e.id for e in loaded.entries] == ["e1"]
    assert any("is a copy of session 0199aaaa" in warning for warning in loaded.warnings)
    assert json.loads(copy.read_text().splitlines()[0])["id"] == loaded.header.id
    assert store.load_for_resume(twin).header.id not in (
        "0199aaaa-0000-7000-8000-00000000000a",
        loaded.header.id,
    )

    again = store.load_for_resume(original)
    assert again.header.id == "0199aaaa-0000-7000-8000-00000000000a"
    assert again.warnings == []
    assert original.read_bytes() == before
    # Once given its own id, a copy is a session like any other.
    assert store.load_for_resume(copy).warnings == []
    # A hard link is the same file, not a copy.
    link = tmp_path / "link.jsonl"
    link.hardlink_to(original)
    assert store.load_for_resume(link).header.id == "0199aaaa-0000-7000-8000-00000000000a"


def test_the_cli_warns_and_a_copy_of_a_running_session_leaves_the_original_alone(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario("copy-warn", [{"text": "first"}, {"text": "second"}])
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    write_models_json(home, scripted_server, "copy-warn")
    env = tempi_env(home, temporal_address)
    first = run_tempi(["--model", "mock/mock-model", "-p", "one"], cwd=work, env=env)
    assert first.returncode == 0, first.stderr
    [original] = (home / "sessions").glob("*/*.jsonl")
    original_id = json.loads(original.read_text().splitlines()[0])["id"]
    copy = tmp_path / "copy.jsonl"
    shutil.copy(original, copy)
    garbage_line = len(copy.read_text().splitlines()) + 1
    with copy.open("a") as handle:
        handle.write("garbage\n")
    before = original.read_bytes()

    second = run_tempi(["--model", "mock/mock-model", "--session", str(copy), "-p", "two"], cwd=work, env=env)
    assert second.returncode == 0, second.stderr
    assert second.stdout == "second\n"
    assert original.read_bytes() == before  # not a byte of the second run in the original
    assert f"is a copy of session {original_id}" in second.stderr
    assert f"{copy}: line {garbage_line} is not a session entry" in second.stderr
    rows = [json.loads(line) for line in copy.read_text().splitlines() if line != "garbage"]
    assert rows[0]["id"] != original_id
    texts = [
        block.get("text")
        for row in rows
        if row.get("type") == "message"
        for block in row["message"]["content"]
        if isinstance(block, dict)
    ]
    assert "two" in texts and "second" in texts


def test_a_deeply_nested_line_is_a_broken_line_not_a_crash(tmp_path: Path) -> None:
    """100000 `[` on a line made `--session` end in a RecursionError (issue 42)."""
    store = SessionStore(tmp_path / "sessions")
    path = _session(store)
    store.append(path, [_entry("e1", None)])  # line 2
    deep_entry = json.dumps(_entry("e2", "e1").to_json_dict())[:-1] + ', "extra": ' + "[" * 100_000 + "}"
    with path.open("a") as handle:
        handle.write("[" * 100_000 + "\n")  # line 3
        handle.write('{"a": ' * 100_000 + "\n")  # line 4
        handle.write(deep_entry + "\n")  # line 5
    store.append(path, [_entry("e3", "e1")])  # line 6: appends still work past them
    loaded = store.load_for_resume(path)
    assert [e.id for e in loaded.entries] == ["e1", "e3"]
    assert loaded.warnings == [f"{path}: lines 3, 4, 5 are not session entries (skipped)"]
    assert [s.id for s in store.list_sessions(CWD)] == [loaded.header.id]


def _run_briefly(work: Callable[[], object], seconds: float = 10.0) -> None:
    """Run `work` in a thread; fail (instead of hanging the test run) if it loops."""
    done = threading.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            work()
        except BaseException as err:
            failure.append(err)
        done.set()

    threading.Thread(target=target, daemon=True).start()
    assert done.wait(seconds), "looped forever on a parentId cycle"
    if failure:
        raise failure[0]


def test_a_self_parent_and_a_parent_cycle_are_named_and_never_loop(tmp_path: Path) -> None:
    """A file whose parentIds loop resumed without a word (issue 42)."""
    store = SessionStore(tmp_path / "sessions")
    path = _session(store)
    with path.open("a") as handle:
        for entry in [
            _entry("e1", None),  # line 2
            _entry("e2", "e1"),  # line 3
            _entry("me", "me"),  # line 4: its own parent
            _entry("c1", "c3"),  # line 5
            _entry("c2", "c1"),  # line 6
            _entry("c3", "c2"),  # line 7: 5 -> 7 -> 6 -> 5
            _entry("below", "c2"),  # line 8: hangs under the cycle, not part of it
        ]:
            handle.write(entry.to_json() + "\n")
    loaded = store.load_for_resume(path)
    assert loaded.warnings == [
        f"{path}: line 4: parentId names the entry itself (the branch is cut off there)",
        f"{path}: lines 5, 6, 7: their parentIds form a cycle (the branch is cut off there)",
    ]

    def build_everywhere() -> None:
        from tempi.cli.interactive.tree_view import TreeView

        for leaf in ["me", "c1", "c3", "below", "e2"]:
            loaded.tree.build_context(leaf)
            TreeView(loaded.tree, leaf)
        # The walk up stops where the cycle closes: c3, c1, c2, below.
        assert len(loaded.tree.build_context("below").messages) == 4

    _run_briefly(build_everywhere)


def test_an_id_repeated_as_its_own_child_is_named_and_never_loops(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    path = _session(store)
    with path.open("a") as handle:
        handle.write(_entry("d", None).to_json() + "\n")  # line 2
        handle.write(_entry("d", "d").to_json() + "\n")  # line 3: same id, below itself
    loaded = store.load_for_resume(path)
    assert loaded.warnings == [
        f"{path}: line 3 repeats the id 'd' of line 2",
        f"{path}: line 3: parentId names the entry itself (the branch is cut off there)",
    ]

    def show() -> None:
        from tempi.cli.html_export import render_session_html
        from tempi.cli.interactive.tree_view import TreeView

        loaded.tree.build_context("d")
        TreeView(loaded.tree, "d")
        render_session_html(loaded)

    _run_briefly(show, seconds=5)
