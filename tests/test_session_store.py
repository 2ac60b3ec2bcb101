"""Session files on disk: layout, idempotent appends, crash repair, old versions, lookup."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tempi.agent.messages import CustomMessage, UserMessage
from tempi.agent.session_entries import CompactionEntry, MessageEntry, SessionHeader, UnknownEntry
from tempi.store.errors import AmbiguousSessionError, SessionFileError, SessionNotFoundError
from tempi.store.loading import Loader
from tempi.store.locking import FileLocks
from tempi.store.session_store import SessionStore
from tests.fixture_paths import PI_FIXTURES

FIXTURES = PI_FIXTURES / "sessions"
CWD = "/home/user/project"


def header(session_id: str = "0199aaaa-0000-7000-8000-000000000001", **extra: Any) -> SessionHeader:
    return SessionHeader(id=session_id, timestamp="2026-11-21T04:49:58.913Z", cwd=CWD, **extra)


def user_entry(
    entry_id: str, parent: str | None, text: str = "hello", ms: int = 1795236598949
) -> MessageEntry:
    return MessageEntry(
        id=entry_id,
        parent_id=parent,
        timestamp="2026-11-21T04:49:58.951Z",
        message=UserMessage(content=[{"type": "text", "text": text}], timestamp=ms),
    )


def chain(count: int, prefix: str = "e") -> list[MessageEntry]:
    entries = []
    parent = None
    for i in range(count):
        entry_id = f"{prefix}{i:07d}"
        entries.append(user_entry(entry_id, parent, text=f"message {i}"))
        parent = entry_id
    return entries


def lines_of(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(line) for line in raw.decode().split("\n")[:-1]]


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


@pytest.fixture
def session(store: SessionStore) -> Path:
    path = store.new_session_path(CWD, header().id, header().timestamp)
    store.create(path, header())
    return path


# --- layout ----------------------------------------------------------------------------


def test_paths_follow_pis_layout(store: SessionStore) -> None:
    # The path pi reported for the recorded RPC session (get_session_stats.sessionFile).
    path = store.new_session_path(CWD, "01a1fc70-9480-71ef-8e93-fb8f669af07c", "2026-11-21T04:49:58.913Z")
    assert path == store.root / "--home-user-project--" / (
        "2026-11-21T04-49-58-913Z_01a1fc70-9480-71ef-8e93-fb8f669af07c.jsonl"
    )
    assert store.session_dir_for(Path("/srv/app")) == store.root / "--srv-app--"


# --- create and append -----------------------------------------------------------------


def test_create_writes_header_and_is_idempotent(store: SessionStore, session: Path) -> None:
    store.create(session, header())
    assert lines_of(session) == [header().to_json_dict()]
    with pytest.raises(SessionFileError, match="different session"):
        store.create(session, header("another-id"))


def test_create_accepts_a_plain_header_dict(store: SessionStore, tmp_path: Path) -> None:
    path = tmp_path / "from-dict.jsonl"
    store.create(path, header(parent_session="/p/old.jsonl").to_json_dict())
    assert lines_of(path)[0]["parentSession"] == "/p/old.jsonl"
    with pytest.raises(ValueError, match="not a session header"):
        store.create(tmp_path / "bad.jsonl", {"type": "session"})


def test_has_entry_sees_every_writer(store: SessionStore, session: Path) -> None:
    entries = chain(2)
    store.append(session, entries[:1])
    assert store.has_entry(session, entries[0].id)
    assert not store.has_entry(session, entries[1].id)
    SessionStore(store.root).append(session, entries[1:])
    assert store.has_entry(session, entries[1].id)


def test_create_after_a_crash_mid_header(store: SessionStore, tmp_path: Path) -> None:
    torn = tmp_path / "torn.jsonl"
    torn.write_text(header().to_json()[:25])
    store.create(torn, header())
    assert lines_of(torn) == [header().to_json_dict()]
    unterminated = tmp_path / "unterminated.jsonl"
    unterminated.write_text(header().to_json())
    store.create(unterminated, header())
    assert lines_of(unterminated) == [header().to_json_dict()]


def test_appended_entries_load_back(store: SessionStore, session: Path) -> None:
    entries = chain(3)
    assert store.append(session, entries) == 3
    written = lines_of(session)
    assert written[1]["parentId"] is None
    assert [d["id"] for d in written[1:]] == [e.id for e in entries]

    loaded = store.load(session)
    assert loaded.header == header()
    assert loaded.skipped_lines == 0
    assert [e.to_json_dict() for e in loaded.entries] == [e.to_json_dict() for e in entries]
    assert loaded.tree.leaf_id == entries[-1].id
    assert [m.text() for m in loaded.tree.build_context().messages] == ["message 0", "message 1", "message 2"]


def test_append_accepts_plain_dicts_and_rejects_non_entries(store: SessionStore, session: Path) -> None:
    entry = {"type": "session_info", "id": "name0001", "parentId": None, "timestamp": "t", "name": "x"}
    assert store.append(session, [entry]) == 1
    with pytest.raises(ValueError, match="not a session entry"):
        store.append(session, [{"type": "message", "parentId": None}])
    with pytest.raises(ValueError, match="header"):
        store.append(session, [header().to_json_dict()])


def test_retried_append_writes_nothing_twice(store: SessionStore, session: Path) -> None:
    entries = chain(5)
    assert store.append(session, entries[:3]) == 3
    assert store.append(session, entries[:3]) == 0
    # A retry that overlaps with new entries writes only the new ones, in order.
    assert store.append(session, entries) == 2
    assert store.append(session, [entries[4], entries[4]]) == 0
    assert [d["id"] for d in lines_of(session)[1:]] == [e.id for e in entries]


def test_append_sees_entries_another_process_wrote(
    tmp_path: Path, store: SessionStore, session: Path
) -> None:
    entries = chain(4)
    store.append(session, entries[:2])
    other = SessionStore(store.root)  # its own id index, as in another worker
    assert other.append(session, entries[:3]) == 1
    # The first store learns about entry 2 from the file tail, not from its memory.
    assert store.append(session, entries) == 1
    assert [d["id"] for d in lines_of(session)[1:]] == [e.id for e in entries]


def test_append_to_missing_or_headerless_file_is_refused(store: SessionStore, tmp_path: Path) -> None:
    with pytest.raises(SessionFileError, match="does not exist"):
        store.append(tmp_path / "nope.jsonl", chain(1))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(SessionFileError, match="no session header"):
        store.append(empty, chain(1))
    not_session = tmp_path / "other.jsonl"
    not_session.write_text('{"hello": 1}\n')
    with pytest.raises(SessionFileError, match="not a session file"):
        store.append(not_session, chain(1))


# --- crash repair ----------------------------------------------------------------------


def crashed_earlier(path: Path) -> None:
    """The torn line was left by a crash a while ago, not by a writer still writing."""
    old = path.stat().st_mtime - 60
    os.utime(path, (old, old))


def test_torn_partial_line_is_dropped_before_appending(store: SessionStore, session: Path) -> None:
    entries = chain(3)
    store.append(session, entries[:1])
    with session.open("ab") as handle:
        handle.write(entries[1].to_json().encode()[:40])  # crash mid-write
    crashed_earlier(session)
    # The retried activity appends the same entries again.
    assert store.append(session, entries[1:]) == 2
    written = lines_of(session)
    assert [d["id"] for d in written[1:]] == [e.id for e in entries]
    assert store.load(session).skipped_lines == 0


def test_torn_line_is_repaired_even_when_nothing_new_is_written(store: SessionStore, session: Path) -> None:
    entries = chain(2)
    store.append(session, entries)
    with session.open("ab") as handle:
        handle.write(b'{"type":"message","id":"half-writ')
    crashed_earlier(session)
    assert store.append(session, entries) == 0
    assert [d["id"] for d in lines_of(session)[1:]] == [e.id for e in entries]


def test_a_fresh_torn_line_is_sealed_not_cut(store: SessionStore, session: Path) -> None:
    """A torn line written just now may be another writer's line in progress (pi appends
    without a lock): it is never truncated; the next entries start on a line of their own."""
    entries = chain(2)
    store.append(session, entries[:1])
    with session.open("ab") as handle:
        handle.write(b'{"type":"message","id":"half-writ')
    assert store.append(session, entries[1:]) == 1
    raw = session.read_bytes().split(b"\n")
    assert raw[2] == b'{"type":"message","id":"half-writ'
    assert json.loads(raw[3])["id"] == entries[1].id
    loaded = store.load(session)
    assert [e.id for e in loaded.entries] == [e.id for e in entries]
    assert loaded.skipped_lines == 1


def test_whole_line_missing_only_its_newline_is_kept(store: SessionStore, session: Path) -> None:
    entries = chain(3)
    store.append(session, entries[:1])
    with session.open("ab") as handle:
        handle.write(entries[1].to_json().encode())  # newline lost
    fresh = SessionStore(store.root)
    assert fresh.append(session, entries[1:]) == 1
    assert [d["id"] for d in lines_of(session)[1:]] == [e.id for e in entries]


def test_torn_header_line_is_completed(store: SessionStore, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(header().to_json())  # no newline after the header
    assert store.append(path, chain(1)) == 1
    assert [d["type"] for d in lines_of(path)] == ["session", "message"]


# --- loading ---------------------------------------------------------------------------


def test_malformed_lines_are_skipped_and_counted(store: SessionStore, session: Path) -> None:
    entries = chain(2)
    store.append(session, entries[:1])
    with session.open("a") as handle:
        handle.write("{broken json\n")
        handle.write("[1, 2, 3]\n")
        handle.write('{"type": "message", "message": {}}\n')  # no id
        handle.write("\n")
        handle.write('{"type": "from_the_future", "id": "f0000001", "parentId": "e0000000", "x": 1}\n')
    store.append(session, entries[1:])
    loaded = store.load(session)
    assert loaded.skipped_lines == 3
    assert [e.id for e in loaded.entries] == ["e0000000", "f0000001", "e0000001"]
    assert isinstance(loaded.entries[1], UnknownEntry)


def test_repeated_loads_see_entries_appended_elsewhere(store: SessionStore, session: Path) -> None:
    entries = chain(4)
    store.append(session, entries[:2])
    assert [e.id for e in store.load(session).entries] == [e.id for e in entries[:2]]
    SessionStore(store.root).append(session, entries[2:3])
    with session.open("ab") as handle:
        handle.write(entries[3].to_json().encode())  # complete, but its newline not yet written
    loaded = store.load(session)
    assert [e.id for e in loaded.entries] == [e.id for e in entries]
    assert loaded.tree.leaf_id == entries[3].id
    assert loaded.skipped_lines == 0
    with session.open("ab") as handle:
        handle.write(b"\n")
    # The kept tree takes the now complete line once, and its context follows.
    again = store.load(session)
    assert [e.id for e in again.tree.entries] == [e.id for e in entries]
    fresh = SessionStore(store.root).load(session)
    assert again.tree.build_context() == fresh.tree.build_context()
    assert len(again.tree.build_context().messages) == 4


def _sessions(store: SessionStore, count: int) -> list[Path]:
    paths = []
    for n in range(count):
        session_header = header(f"0199aaaa-0000-7000-8000-{n:012d}")
        path = store.new_session_path(CWD, session_header.id, session_header.timestamp)
        store.create(path, session_header)
        store.append(path, chain(2, prefix=f"s{n:03d}-"))
        paths.append(path)
    return paths


def test_a_worker_running_a_hundred_sessions_parses_only_their_new_lines(store: SessionStore) -> None:
    paths = _sessions(store, 100)
    first = [store.load(path).entries[0] for path in paths]
    for n, path in enumerate(paths):
        store.append(path, [user_entry(f"s{n:03d}-next", f"s{n:03d}-0000001")])
    again = [store.load(path) for path in paths]
    assert [len(loaded.entries) for loaded in again] == [3] * 100
    # The lines read on the first turn were not parsed again on the second.
    assert all(loaded.entries[0] is entry for loaded, entry in zip(again, first, strict=True))


def test_parsed_sessions_past_the_bytes_bound_are_read_again(store: SessionStore) -> None:
    paths = _sessions(store, 3)
    size = paths[0].stat().st_size
    loader = Loader(FileLocks(), max_bytes=2 * size + size // 2)
    first = [loader.load(path).entries[0] for path in paths]
    assert loader.load(paths[2]).entries[0] is first[2]
    assert loader.load(paths[1]).entries[0] is first[1]
    reread = loader.load(paths[0])  # the least recently loaded was dropped
    assert reread.entries[0] is not first[0]
    assert [e.id for e in reread.entries] == [e.id for e in chain(2, prefix="s000-")]
    # A session larger than the whole bound is still kept while it is the one in use.
    tiny = Loader(FileLocks(), max_bytes=10)
    kept = tiny.load(paths[0]).entries[0]
    assert tiny.load(paths[0]).entries[0] is kept


def test_load_notices_a_replaced_file(store: SessionStore, session: Path, tmp_path: Path) -> None:
    store.append(session, chain(3))
    assert len(store.load(session).entries) == 3
    replacement = tmp_path / "replacement.jsonl"
    shutil.copy(session, replacement)
    with replacement.open("r+b") as handle:
        handle.truncate(len(session.read_bytes().split(b"\n", 2)[0]) + 1)  # header only
    os.replace(replacement, session)
    store.append(session, [user_entry("other001", None, text="fresh")])
    assert [e.id for e in store.load(session).entries] == ["other001"]


def test_line_separators_inside_strings_do_not_split_lines(store: SessionStore, session: Path) -> None:
    entry = user_entry("u0000001", None, text="para\u2028graph\u2029end\r")
    store.append(session, [entry])
    loaded = store.load(session)
    assert loaded.skipped_lines == 0
    assert loaded.entries[0].to_json_dict() == entry.to_json_dict()


def test_non_session_files_are_refused(store: SessionStore, tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"type": "message", "id": "x"}\n')
    with pytest.raises(SessionFileError, match="not a session file"):
        store.load(path)
    with pytest.raises(SessionFileError, match="does not exist"):
        store.load(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.jsonl")))
def test_pi_files_load_and_append_without_changing_existing_lines(
    store: SessionStore, tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    shutil.copy(FIXTURES / name, path)
    original = path.read_bytes()
    loaded = store.load(path)
    assert loaded.skipped_lines == 0 and loaded.migrated_from is None
    assert len(loaded.entries) == original.count(b"\n") - 1
    follow_up = user_entry("tempi001", loaded.tree.leaf_id, text="continued in tempi")
    assert store.append(path, [follow_up]) == 1
    assert path.read_bytes().startswith(original)
    assert store.load(path).tree.build_context().messages[-1].text() == "continued in tempi"  # type: ignore[union-attr]


# --- old versions ----------------------------------------------------------------------


def write_lines(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


V1_ROWS: list[dict[str, Any]] = [
    {"type": "session", "id": "v1-session", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": CWD},
    {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z",
     "message": {"role": "user", "content": "old one", "timestamp": 1}},
    {"type": "message", "timestamp": "2025-01-01T00:00:02.000Z",
     "message": {"role": "user", "content": "old two", "timestamp": 2}},
    {"type": "compaction", "timestamp": "2025-01-01T00:00:03.000Z", "summary": "S",
     "firstKeptEntryIndex": 2, "tokensBefore": 50},
    {"type": "message", "timestamp": "2025-01-01T00:00:04.000Z",
     "message": {"role": "user", "content": "new", "timestamp": 4}},
]  # fmt: skip


def test_version_1_gets_ids_a_chain_and_a_resolved_compaction(store: SessionStore, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "v1.jsonl", V1_ROWS)
    loaded = store.load(path)
    assert loaded.migrated_from == 1
    ids = [e.id for e in loaded.entries]
    assert len(set(ids)) == 4 and all(len(i) == 8 for i in ids)
    assert [e.parent_id for e in loaded.entries] == [None, *ids[:-1]]
    compaction = loaded.entries[2]
    assert isinstance(compaction, CompactionEntry)
    assert compaction.first_kept_entry_id == ids[1]  # line 2 counting the header as 0
    assert "firstKeptEntryIndex" not in compaction.to_json_dict()
    context = loaded.tree.build_context()
    assert [m.role for m in context.messages] == ["compactionSummary", "user", "user"]

    # Upgraded on disk, and a second load sees the same ids.
    rows = lines_of(path)
    assert rows[0]["version"] == 3
    assert [r["id"] for r in rows[1:]] == ids
    again = store.load(path)
    assert again.migrated_from is None and [e.id for e in again.entries] == ids


def test_version_2_renames_hook_messages(store: SessionStore, tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "v2.jsonl",
        [
            {
                "type": "session",
                "version": 2,
                "id": "v2-session",
                "timestamp": "2025-06-01T00:00:00.000Z",
                "cwd": CWD,
            },
            {
                "type": "message",
                "id": "aaaa0001",
                "parentId": None,
                "timestamp": "2025-06-01T00:00:01.000Z",
                "message": {
                    "role": "hookMessage",
                    "customType": "ext",
                    "content": "from a hook",
                    "display": True,
                    "timestamp": 1,
                },
            },
        ],
    )
    loaded = store.load(path)
    assert loaded.migrated_from == 2
    message = loaded.tree.build_context().messages[0]
    assert isinstance(message, CustomMessage) and message.content == "from a hook"
    assert lines_of(path)[1]["message"]["role"] == "custom"


def test_appending_to_an_old_file_upgrades_it_first(store: SessionStore, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "v1.jsonl", V1_ROWS)
    assert store.append(path, [user_entry("tempi001", None)]) == 1
    rows = lines_of(path)
    assert rows[0]["version"] == 3
    assert all("id" in row for row in rows)


# --- finding sessions ------------------------------------------------------------------


# pi's first recordings; the provider recordings beside them are not part of these tests.
PI_RECORDED_SESSIONS = [
    FIXTURES / f"{name}.jsonl"
    for name in ("basic-anthropic", "basic-openai", "overflow", "rpc-steer-followup-compact", "tools")
]


@pytest.fixture
def populated(store: SessionStore) -> SessionStore:
    for path in PI_RECORDED_SESSIONS:
        loaded_header = json.loads(path.read_text().split("\n", 1)[0])
        target = store.new_session_path(CWD, loaded_header["id"], loaded_header["timestamp"])
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    other = store.new_session_path(
        "/elsewhere", "0000feed-0000-7000-8000-000000000000", "2026-01-01T00:00:00.000Z"
    )
    store.create(other, SessionHeader(id="0000feed-0000-7000-8000-000000000000",
                                      timestamp="2026-01-01T00:00:00.000Z", cwd="/elsewhere"))  # fmt: skip
    return store


def test_list_sessions_for_a_directory_newest_first(populated: SessionStore) -> None:
    sessions = populated.list_sessions(CWD)
    assert len(sessions) == 5
    assert [s.modified for s in sessions] == sorted((s.modified for s in sessions), reverse=True)
    by_id = {s.id: s for s in sessions}
    rpc = by_id["01a1fc70-9480-71ef-8e93-fb8f669af07c"]
    assert rpc.name == "rpc-capture"
    assert rpc.first_message == "Run the slow command."
    assert rpc.message_count == 11
    assert rpc.cwd == CWD
    assert rpc.created.isoformat().startswith("2026-11-21T04:49:58.913")
    assert {s.path.parent.name for s in sessions} == {"--home-user-project--"}


def test_list_all_sessions(populated: SessionStore) -> None:
    everything = populated.list_sessions()
    assert len(everything) == 6
    empty = next(s for s in everything if s.cwd == "/elsewhere")
    assert (empty.message_count, empty.first_message, empty.name) == (0, None, None)


def test_find_session_by_id_prefix_and_path(populated: SessionStore) -> None:
    full = populated.find_session("01a1fc70-9480-71ef-8e93-fb8f669af07c")
    assert full.name.endswith("_01a1fc70-9480-71ef-8e93-fb8f669af07c.jsonl")
    assert populated.find_session("0000fe") == populated.find_session("0000feed-0000-7000-8000-000000000000")
    assert populated.find_session(str(full)) == full


def test_find_session_errors_are_clear(populated: SessionStore) -> None:
    with pytest.raises(AmbiguousSessionError, match=r"matches \d+ sessions"):
        populated.find_session("01a1fc7")
    with pytest.raises(SessionNotFoundError, match="zzz"):
        populated.find_session("zzz")
    with pytest.raises(SessionNotFoundError, match="does not exist"):
        populated.find_session("/no/such/file.jsonl")


def test_find_session_looks_in_a_session_dir_first(store: SessionStore, tmp_path: Path) -> None:
    """settings.json's sessionDir keeps files flat, outside the store's root: an id or id
    prefix finds them there (what `tempi abort|steer|stop ID` rely on, issue 42)."""
    flat = tmp_path / "flat"
    elsewhere = flat / "2026-11-21T04-49-58-913Z_0199bbbb-0000-7000-8000-000000000002.jsonl"
    store.create(elsewhere, header("0199bbbb-0000-7000-8000-000000000002"))
    assert store.find_session("0199bbbb", flat) == elsewhere
    assert store.find_session("0199BBBB-0000-7000-8000-000000000002", flat) == elsewhere
    with pytest.raises(SessionNotFoundError):
        store.find_session("0199bbbb")


def test_most_recent_is_the_last_changed_file(store: SessionStore) -> None:
    assert store.most_recent(CWD) is None
    paths = []
    for i in range(3):
        session_id = f"0199aaaa-0000-7000-8000-00000000000{i}"
        path = store.new_session_path(CWD, session_id, f"2026-01-0{i + 1}T00:00:00.000Z")
        store.create(path, header(session_id))
        paths.append(path)
    for path, mtime in zip(paths, (1_000_000_000, 1_500_000_000, 1_200_000_000), strict=True):
        os.utime(path, (mtime, mtime))
    assert store.most_recent(CWD) == paths[1]
    store.append(paths[2], chain(1))
    assert store.most_recent(CWD) == paths[2]
    assert store.most_recent("/some/other/dir") is None


# --- concurrency -----------------------------------------------------------------------


def test_concurrent_appends_from_threads_with_separate_indexes(store: SessionStore, session: Path) -> None:
    batches = [chain(40, prefix=f"t{n}") for n in range(4)]

    def run(batch: list[MessageEntry]) -> None:
        mine = SessionStore(store.root)
        for start in range(0, len(batch), 5):
            mine.append(session, batch[start : start + 5])
            mine.append(session, batch[: start + 5])  # retries of everything so far

    threads = [threading.Thread(target=run, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [row["id"] for row in lines_of(session)[1:]]
    assert sorted(ids) == sorted(e.id for batch in batches for e in batch)


APPENDER = """
import sys
from pathlib import Path
from tempi.store.session_store import SessionStore
from tempi.agent.session_entries import SessionInfoEntry
path = Path(sys.argv[1])
store = SessionStore(path.parent)
entries = [SessionInfoEntry(id=f"{i:08x}", timestamp="t", name=f"n{i}") for i in range(60)]
for start in range(0, 60, 3):
    store.append(path, entries[start : start + 6])
"""


def test_concurrent_appends_from_processes(store: SessionStore, session: Path) -> None:
    processes = [
        subprocess.Popen([sys.executable, "-c", APPENDER, str(session)], stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    for process in processes:
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr.decode()
    ids = [row["id"] for row in lines_of(session)[1:]]
    assert sorted(ids) == [f"{i:08x}" for i in range(60)]
