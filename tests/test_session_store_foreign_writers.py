"""pi appends to session files without tempi's lock: none of its lines may be lost or cut,
and none of tempi's, however large the lines and however the writes interleave."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from tempi.agent.messages import UserMessage
from tempi.agent.session_entries import MessageEntry, SessionHeader
from tempi.store.session_store import SessionStore

# pi's way of appending: open for append, write the line, no lock (`appendFileSync`).
FOREIGN_WRITER = """
import json, os, sys
path, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    size = 200_000 + (i * 7919) % 1_500_000
    line = json.dumps({"type": "custom", "id": f"pi{i:06d}", "parentId": None,
                       "timestamp": "2026-11-21T00:00:00.000Z", "customType": "pi",
                       "data": "p" * size}) + "\\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
"""


def _entry(i: int) -> MessageEntry:
    size = 150_000 + (i * 104_729) % 1_200_000
    return MessageEntry(
        id=f"tp{i:06d}",
        parent_id=None,
        timestamp="2026-11-21T00:00:00.000Z",
        message=UserMessage(content=[{"type": "text", "text": "t" * size}], timestamp=0),
    )


def test_a_foreign_writer_appending_big_lines_loses_nothing(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions")
    path = tmp_path / "shared.jsonl"
    store.create(path, SessionHeader(id="shared", timestamp="2026-11-21T00:00:00.000Z", cwd="/w"))
    foreign_count, ours_count = 60, 60
    foreign = subprocess.Popen(
        [sys.executable, "-c", FOREIGN_WRITER, str(path), str(foreign_count)], stderr=subprocess.PIPE
    )
    errors: list[BaseException] = []

    def ours(start: int) -> None:
        # Two tempi writers as well (a worker and a retried activity), each with its own store.
        mine = SessionStore(store.root)
        try:
            for i in range(start, ours_count, 2):
                mine.append(path, [_entry(i)])
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=ours, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    _, stderr = foreign.communicate(timeout=120)
    assert foreign.returncode == 0, stderr.decode()
    assert not errors, errors

    lines = [line for line in path.read_bytes().split(b"\n") if line]
    rows = [json.loads(line) for line in lines]  # every line whole: no torn or glued lines
    ids = [row["id"] for row in rows]
    assert ids[0] == "shared"
    assert sorted(ids[1:]) == sorted(
        [f"pi{i:06d}" for i in range(foreign_count)] + [f"tp{i:06d}" for i in range(ours_count)]
    )
    loaded = store.load(path)
    assert loaded.skipped_lines == 0
    assert len(loaded.entries) == foreign_count + ours_count
