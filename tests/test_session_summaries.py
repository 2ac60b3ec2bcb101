"""Session listings as overviews need them: the model, turns, tokens and cost of each file,
and a cache that reads a file again only when it changed (the web console lists every
session every few seconds)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tempi.store.catalog import SummaryCache, list_sessions, session_dir_for
from tests.fixture_paths import PI_FIXTURES

SOURCE = PI_FIXTURES / "sessions" / "tools.jsonl"  # pi's own file: 8 turns of mock/mock-model


def _place(root: Path, source: Path) -> Path:
    header = json.loads(source.read_text().split("\n", 1)[0])
    target = session_dir_for(root, header["cwd"]) / f"x_{header['id']}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, target)
    return target


def _assistant(text: str, *, tokens: tuple[int, int], cost: float, entry_id: str, parent: str) -> str:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "other",
        "model": "bigger-model",
        "usage": {"input": tokens[0], "output": tokens[1], "cost": {"total": cost}},
        "stopReason": "stop",
        "timestamp": 1_800_000_000_000,
    }
    entry = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2027-01-15T08:00:00.000Z"}
    return json.dumps({**entry, "message": message}) + "\n"


def test_a_summary_counts_turns_tokens_and_cost_of_the_file(tmp_path: Path) -> None:
    _place(tmp_path, SOURCE)
    expected_tokens, expected_cost, turns = 0, 0.0, 0
    for line in SOURCE.read_text().splitlines()[1:]:
        message = json.loads(line).get("message") or {}
        if message.get("role") == "assistant":
            turns += 1
            usage = message["usage"]
            expected_tokens += sum(usage[k] for k in ("input", "output", "cacheRead", "cacheWrite"))
            expected_cost += usage["cost"]["total"]
    (summary,) = list_sessions([tmp_path])
    assert (summary.model, summary.turns) == ("mock/mock-model", 8) and turns == 8
    assert summary.tokens == expected_tokens > 0
    assert summary.cost == expected_cost


def test_the_cache_follows_changed_added_and_removed_files(tmp_path: Path) -> None:
    path = _place(tmp_path, SOURCE)
    cache = SummaryCache([tmp_path])
    (first,) = cache.list()
    last_id = json.loads(SOURCE.read_text().splitlines()[-1])["id"]

    with path.open("a") as out:
        out.write(_assistant("more", tokens=(1000, 10), cost=0.5, entry_id="feed0001", parent=last_id))
    (grown,) = cache.list()
    assert (grown.turns, grown.tokens, grown.model) == (
        first.turns + 1,
        first.tokens + 1010,
        "other/bigger-model",
    )
    assert grown.cost == first.cost + 0.5

    # Same size and mtime: the cached row stands (the file is not parsed again).
    stamp = path.stat()
    path.write_text(path.read_text().replace("bigger-model", "larger-model"))
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert cache.list()[0].model == "other/bigger-model"

    other = json.loads(SOURCE.read_text().split("\n", 1)[0])
    copy = tmp_path / "copy.jsonl"
    copy.write_text(SOURCE.read_text().replace(other["id"], "0000beef-0000-7000-8000-000000000000", 1))
    _place(tmp_path, copy)
    assert len(cache.list()) == 2
    path.unlink()
    assert [s.id for s in cache.list()] == ["0000beef-0000-7000-8000-000000000000"]
