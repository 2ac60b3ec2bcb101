"""edit: exact and fuzzy matching, all-or-nothing, preserved bytes, retries, diffs."""

from __future__ import annotations

import asyncio
import itertools
import random
from pathlib import Path
from typing import Any

from tempi.activities.tools import ToolContext, ToolOutcome, execute_tool


def _ctx(root: Path, call_id: str = "") -> ToolContext:
    return ToolContext(cwd=str(root), tool_call_id=call_id, state_dir=str(root.parent / "state"))


def _text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


async def _edit(root: Path, path: str, edits: list[dict[str, str]], call_id: str = "") -> ToolOutcome:
    return await execute_tool("edit", {"path": path, "edits": edits}, _ctx(root, call_id))


async def test_retry_after_the_edit_landed_reports_the_same_success(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "config.py").write_text("retries = 1\n")
    # After this edit oldText "1" still occurs twice, so a blind retry would fail or double-apply.
    edit = [{"oldText": "1", "newText": "11"}]
    first = await _edit(root, "config.py", edit, call_id="call-42")
    assert not first.is_error
    retry = await _edit(root, "config.py", edit, call_id="call-42")
    assert not retry.is_error
    assert retry.to_json_dict() == first.to_json_dict()
    assert (root / "config.py").read_text() == "retries = 11\n"


async def test_retry_does_not_hide_a_change_made_since(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    edit = [{"oldText": "alpha", "newText": "beta"}]
    assert not (await _edit(root, "a.txt", edit, call_id="call-1")).is_error
    (root / "a.txt").write_text("gamma\n")
    retry = await _edit(root, "a.txt", edit, call_id="call-1")
    assert retry.is_error and "Could not find" in _text(retry)
    assert (root / "a.txt").read_text() == "gamma\n"


async def test_fuzzy_match_through_smart_quotes_changes_only_the_match(tmp_path: Path):
    (tmp_path / "app.py").write_text(
        "title = “Intro” — part one  \nprint(“hello”)\u00a0\ngreeting = ‘hi’\n", encoding="utf-8"
    )
    outcome = await _edit(tmp_path, "app.py", [{"oldText": 'print("hello")', "newText": 'print("bye")'}])
    assert not outcome.is_error, _text(outcome)
    # The other lines keep their typographic quotes, dash and trailing spaces.
    assert (tmp_path / "app.py").read_text() == (
        'title = “Intro” — part one  \nprint("bye")\u00a0\ngreeting = ‘hi’\n'
    )
    assert outcome.details["firstChangedLine"] == 2


async def test_fuzzy_match_across_trailing_whitespace_and_compatibility_forms(tmp_path: Path):
    (tmp_path / "notes.md").write_text("The ﬁrst step   \nthe second step\n", encoding="utf-8")
    outcome = await _edit(
        tmp_path, "notes.md", [{"oldText": "The first step\nthe second", "newText": "Step one\nthe second"}]
    )
    assert not outcome.is_error, _text(outcome)
    assert (tmp_path / "notes.md").read_text() == "Step one\nthe second step\n"


async def test_crlf_and_bom_are_preserved(tmp_path: Path):
    path = tmp_path / "win.txt"
    path.write_bytes(b"\xef\xbb\xbfalpha\r\nbeta\r\ngamma\r\n")
    # The model sees LF line endings; its LF oldText/newText match and are written back as CRLF.
    outcome = await _edit(tmp_path, "win.txt", [{"oldText": "beta\ngamma", "newText": "BETA\nGAMMA\ndelta"}])
    assert not outcome.is_error, _text(outcome)
    assert path.read_bytes() == b"\xef\xbb\xbfalpha\r\nBETA\r\nGAMMA\r\ndelta\r\n"
    assert outcome.details == {
        "diff": " 1 alpha\n-2 beta\n-3 gamma\n+2 BETA\n+3 GAMMA\n+4 delta",
        "firstChangedLine": 2,
    }


async def test_mixed_line_endings_outside_the_edit_are_untouched(tmp_path: Path):
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"one\r\ntwo\nthree\r\n")
    outcome = await _edit(tmp_path, "mixed.txt", [{"oldText": "two", "newText": "2"}])
    assert not outcome.is_error
    assert path.read_bytes() == b"one\r\n2\nthree\r\n"


async def test_overlapping_edits_are_rejected_and_nothing_is_written(tmp_path: Path):
    (tmp_path / "f.txt").write_text("abcdef\n")
    outcome = await _edit(
        tmp_path, "f.txt", [{"oldText": "abcd", "newText": "X"}, {"oldText": "cdef", "newText": "Y"}]
    )
    assert outcome.is_error
    assert "edits[0] and edits[1] overlap" in _text(outcome)
    assert (tmp_path / "f.txt").read_text() == "abcdef\n"


async def test_one_failing_edit_writes_nothing_and_is_named(tmp_path: Path):
    (tmp_path / "f.txt").write_text("red\ngreen\nblue\n")
    outcome = await _edit(
        tmp_path,
        "f.txt",
        [
            {"oldText": "red", "newText": "RED"},
            {"oldText": "purple", "newText": "x"},
            {"oldText": "blue", "newText": "B"},
        ],
    )
    assert outcome.is_error and "edits[1]" in _text(outcome) and "purple" not in _text(outcome)
    assert (tmp_path / "f.txt").read_text() == "red\ngreen\nblue\n"


async def test_edits_match_the_original_not_each_other(tmp_path: Path):
    (tmp_path / "f.txt").write_text("a = 1\nb = 2\n")
    # The second edit's oldText only exists in the original, before the first edit ran.
    outcome = await _edit(
        tmp_path,
        "f.txt",
        [{"oldText": "a = 1", "newText": "b = 2x"}, {"oldText": "b = 2\n", "newText": "c = 3\n"}],
    )
    assert not outcome.is_error, _text(outcome)
    assert (tmp_path / "f.txt").read_text() == "b = 2x\nc = 3\n"


async def test_legacy_single_edit_arguments_are_accepted(tmp_path: Path):
    (tmp_path / "f.txt").write_text("old value\n")
    outcome = await execute_tool(
        "edit", {"path": "f.txt", "oldText": "old", "newText": "new"}, _ctx(tmp_path)
    )
    assert not outcome.is_error
    assert (tmp_path / "f.txt").read_text() == "new value\n"


async def test_useless_edits_are_errors(tmp_path: Path):
    (tmp_path / "f.txt").write_text("same\n")
    empty = await _edit(tmp_path, "f.txt", [{"oldText": "", "newText": "x"}])
    assert empty.is_error and "empty" in _text(empty)
    unchanged = await _edit(tmp_path, "f.txt", [{"oldText": "same", "newText": "same"}])
    assert unchanged.is_error and "No changes" in _text(unchanged)
    none = await _edit(tmp_path, "f.txt", [])
    assert none.is_error
    assert (tmp_path / "f.txt").read_text() == "same\n"


async def test_binary_and_missing_files_are_refused(tmp_path: Path):
    (tmp_path / "blob.bin").write_bytes(b"ab\x00cd")
    binary = await _edit(tmp_path, "blob.bin", [{"oldText": "ab", "newText": "x"}])
    assert binary.is_error and "binary" in _text(binary)
    assert (tmp_path / "blob.bin").read_bytes() == b"ab\x00cd"
    missing = await _edit(tmp_path, "nope.txt", [{"oldText": "a", "newText": "b"}])
    assert missing.is_error and "nope.txt" in _text(missing) and "write" in _text(missing)


async def test_diff_shows_four_lines_of_context_and_elides_the_rest(tmp_path: Path):
    (tmp_path / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 31)))
    outcome = await _edit(
        tmp_path,
        "f.txt",
        [{"oldText": "line 10\n", "newText": "ten\n"}, {"oldText": "line 25\n", "newText": ""}],
    )
    assert outcome.details["firstChangedLine"] == 10
    assert outcome.details["diff"].split("\n") == [
        "    ...",
        "  6 line 6", "  7 line 7", "  8 line 8", "  9 line 9",
        "-10 line 10",
        "+10 ten",
        " 11 line 11", " 12 line 12", " 13 line 13", " 14 line 14",
        "    ...",
        " 21 line 21", " 22 line 22", " 23 line 23", " 24 line 24",
        "-25 line 25",
        " 26 line 26", " 27 line 27", " 28 line 28", " 29 line 29",
        "    ...",
    ]  # fmt: skip


async def test_concurrent_edits_of_one_file_are_serialized(tmp_path: Path):
    names = [f"name{n}" for n in range(8)]
    (tmp_path / "f.txt").write_text("".join(f"{name} = 0\n" for name in names))
    outcomes = await asyncio.gather(
        *(_edit(tmp_path, "f.txt", [{"oldText": f"{name} = 0", "newText": f"{name} = 1"}]) for name in names)
    )
    assert not any(outcome.is_error for outcome in outcomes)
    assert (tmp_path / "f.txt").read_text() == "".join(f"{name} = 1\n" for name in names)


def _expected(text: str, edits: list[dict[str, str]]) -> str | None:
    """What an all-or-nothing exact multi-edit must produce, or None if it must fail."""
    spans = []
    for edit in edits:
        old = edit["oldText"]
        if not old or text.count(old) != 1:
            return None
        start = text.find(old)
        spans.append((start, start + len(old), edit["newText"]))
    spans.sort()
    if any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans)):
        return None
    result = text
    for start, end, new in reversed(spans):
        result = result[:start] + new + result[end:]
    return None if result == text else result


async def test_random_multi_edits_are_all_or_nothing(tmp_path: Path):
    rng = random.Random(20240601)
    path = tmp_path / "f.txt"
    outcomes: dict[bool, int] = {True: 0, False: 0}
    for _ in range(250):
        # No spaces or typographic characters, so the fuzzy fallback finds what exact matching finds.
        lf_text = "".join(rng.choice("abc\n") for _ in range(rng.randint(1, 40)))
        crlf = "\n" in lf_text and rng.random() < 0.3
        original = lf_text.replace("\n", "\r\n") if crlf else lf_text
        path.write_bytes(original.encode())
        edits: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 3)):
            start = rng.randrange(len(lf_text))
            old = lf_text[start : start + rng.randint(1, 6)]
            edits.append(
                {"oldText": old, "newText": "".join(rng.choice("xy\n") for _ in range(rng.randint(0, 4)))}
            )
        expected = _expected(lf_text, edits)
        outcome = await _edit(tmp_path, "f.txt", edits)
        written = path.read_bytes().decode()
        if expected is None:
            assert outcome.is_error, (lf_text, edits)
            assert written == original
        else:
            assert not outcome.is_error, (lf_text, edits, _text(outcome))
            assert written == (expected.replace("\n", "\r\n") if crlf else expected)
        outcomes[outcome.is_error] += 1
    assert min(outcomes.values()) > 25  # both paths were exercised
