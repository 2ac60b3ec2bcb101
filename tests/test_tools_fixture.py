"""Replays every tool call pi made in the recorded `tools` scenario and compares tempi's
results with pi's: error flags, truncation numbers, continuation offsets, match lines,
edit outcomes. Prose differs on purpose (tempi words its own messages), so texts are
compared by the facts they carry. Deliberate differences are called out case by case.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tempi.activities.tools import ToolContext, ToolOutcome, execute_tool


def _text(outcome: ToolOutcome | dict[str, Any]) -> str:
    content = outcome["content"] if isinstance(outcome, dict) else outcome.to_json_dict()["content"]
    return "".join(block.get("text", "") for block in content)


def _without_notice(text: str) -> str:
    """Tool output minus the trailing `[...]` notice both pi and tempi append."""
    return re.sub(r"\n\n\[[^\n]*\]$", "", text)


def _numbers(pattern: str, text: str) -> list[str]:
    return re.findall(pattern, text)


@pytest.fixture
def workspace(tmp_path: Path, fixtures_dir: Path) -> Path:
    """The scenario's starting workspace: the fixture copy plus what pi's run had (a git
    repo whose .gitignore hides ignored.txt)."""
    root = tmp_path / "project"
    shutil.copytree(fixtures_dir / "workspaces" / "tools-initial", root)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    (root / "ignored.txt").write_text("needle hidden by .gitignore\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture(scope="module")
def pi_calls(fixtures_dir: Path) -> list[dict[str, Any]]:
    """pi's tool calls in scenario order, each with its recorded result."""
    starts: list[dict[str, Any]] = []
    ends: dict[str, dict[str, Any]] = {}
    for line in (fixtures_dir / "events" / "tools.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "tool_execution_start":
            starts.append(event)
        elif event["type"] == "tool_execution_end":
            ends[event["toolCallId"]] = event
    scenario = json.loads((fixtures_dir / "scenarios" / "tools.json").read_text())
    scripted = [(call["name"], call["arguments"]) for turn in scenario for call in turn.get("tool_calls", [])]
    assert [(start["toolName"], start["args"]) for start in starts] == scripted
    return [
        {"name": start["toolName"], "args": start["args"], **ends[start["toolCallId"]]} for start in starts
    ]


async def test_every_recorded_tool_call_matches_pi(
    workspace: Path, tmp_path: Path, pi_calls: list[dict[str, Any]]
):
    # pi ran each turn's calls in parallel; replaying them in order keeps results deterministic.
    ours: list[ToolOutcome] = []
    for index, call in enumerate(pi_calls):
        ctx = ToolContext(
            cwd=str(workspace), tool_call_id=f"replay-{index}", spill_dir=str(tmp_path / "spill")
        )
        ours.append(await execute_tool(call["name"], call["args"], ctx))

    by_key = {
        (c["name"], json.dumps(c["args"], sort_keys=True)): (c, o)
        for c, o in zip(pi_calls, ours, strict=True)
    }

    def case(name: str, **args: Any) -> tuple[dict[str, Any], ToolOutcome]:
        return by_key[(name, json.dumps(args, sort_keys=True))]

    # read big.txt: same head truncation, same next offset.
    pi, mine = case("read", path="big.txt")
    assert not mine.is_error and not pi["isError"]
    assert mine.details["truncation"] == pi["result"]["details"]["truncation"]
    assert _without_notice(_text(mine)) == _without_notice(_text(pi["result"]))
    assert (
        _numbers(r"offset=(\d+)", _text(mine)) == _numbers(r"offset=(\d+)", _text(pi["result"])) == ["2001"]
    )

    # read with offset/limit: same lines, same "N more lines" count and next offset.
    pi, mine = case("read", path="big.txt", offset=2990, limit=5)
    assert _without_notice(_text(mine)) == _without_notice(_text(pi["result"]))
    assert _numbers(r"(\d+) more lines", _text(mine)) == _numbers(r"(\d+) more lines", _text(pi["result"]))
    assert _numbers(r"offset=(\d+)", _text(mine)) == _numbers(r"offset=(\d+)", _text(pi["result"]))

    # read past the end: an error naming the line count.
    pi, mine = case("read", path="big.txt", offset=5000)
    assert mine.is_error and pi["isError"]
    assert "3001" in _text(mine) and "3001" in _text(pi["result"])

    # read of a binary file: pi returned the raw bytes as text (NUL included); tempi
    # deliberately refuses and points at bash instead.
    pi, mine = case("read", path="bin.dat")
    assert not pi["isError"] and "\x00" in _text(pi["result"])
    assert mine.is_error and "binary" in _text(mine) and "bash" in _text(mine)

    # read of a file whose first line is over 50 KB: a hint instead of content.
    pi, mine = case("read", path="wide.txt")
    assert mine.details["truncation"] == pi["result"]["details"]["truncation"]
    for fact in ("68.4KB", "50.0KB", "sed -n '1p' wide.txt", "head -c 51200"):
        assert fact in _text(mine) and fact in _text(pi["result"])

    # bash with 5000 lines of output: the same tail and numbers; the full output is on disk.
    pi, mine = case("bash", command="seq 1 5000")
    pi_truncation = pi["result"]["details"]["truncation"]
    assert mine.details["truncation"] == pi_truncation
    assert _without_notice(_text(mine)) == _without_notice(_text(pi["result"]))
    assert _numbers(r"(\d+)-(\d+) of (\d+)", _text(mine)) == _numbers(
        r"(\d+)-(\d+) of (\d+)", _text(pi["result"])
    )
    full_output = Path(mine.details["fullOutputPath"])
    assert full_output.read_text() == "".join(f"{n}\n" for n in range(1, 5001))
    assert str(full_output) in _text(mine)

    # Non-zero exit: an error that keeps the merged output and ends with the exit code.
    pi, mine = case("bash", command="echo out; echo err 1>&2; exit 3")
    assert mine.is_error and pi["isError"]
    assert _text(mine) == _text(pi["result"]) == "out\nerr\n\n\nCommand exited with code 3"

    pi, mine = case("bash", command="sleep 5; echo never", timeout=1)
    assert mine.is_error and pi["isError"]
    assert "never" not in _text(mine)
    assert "timed out after 1 seconds" in _text(mine) and "timed out after 1 seconds" in _text(pi["result"])

    # edit of a CRLF file: identical diff and first changed line; CRLF kept on disk.
    pi, mine = case(
        "edit",
        path="crlf.txt",
        edits=[{"oldText": "line two", "newText": "LINE 2"}, {"oldText": "line four", "newText": "LINE 4"}],
    )
    assert not mine.is_error and not pi["isError"]
    assert mine.details == pi["result"]["details"]
    assert (workspace / "crlf.txt").read_bytes() == b"line one\r\nLINE 2\r\nline three\r\nLINE 4\r\n"

    pi, mine = case("edit", path="dup.txt", edits=[{"oldText": "same", "newText": "x"}])
    assert mine.is_error and pi["isError"]
    assert "2 times" in _text(mine) and "2 occurrences" in _text(pi["result"])
    assert (workspace / "dup.txt").read_text() == "same\nsame\n"

    # edit matched through smart quotes and an em dash. Same outcome and first changed line;
    # pi's diff shows the old line with the quotes already folded (it rewrote the whole file
    # in folded form), tempi's shows the line as it really was, since only the match changes.
    pi, mine = case(
        "edit", path="quotes.txt", edits=[{"oldText": 'it\'s "quoted" - here', "newText": "replaced"}]
    )
    assert not mine.is_error and not pi["isError"]
    assert mine.details["firstChangedLine"] == pi["result"]["details"]["firstChangedLine"] == 1
    assert mine.details["diff"].splitlines()[1:] == pi["result"]["details"]["diff"].splitlines()[1:]
    assert mine.details["diff"].splitlines()[0] == "-1 it’s “quoted” — here"
    assert (workspace / "quotes.txt").read_text() == "replaced\n"

    pi, mine = case("write", path="deep/nested/dir/new.txt", content="a\nb\n")
    assert not mine.is_error and not pi["isError"]
    assert "4 bytes" in _text(mine) and "4 bytes" in _text(pi["result"])
    assert (workspace / "deep/nested/dir/new.txt").read_text() == "a\nb\n"

    # ls: pi's ls ran in parallel with the write above and did not see deep/ yet.
    pi, mine = case("ls", path=".")
    assert _text(mine).split("\n") == sorted([*_text(pi["result"]).split("\n"), "deep/"], key=str.lower)

    # ls deep: pi's call raced the write and failed; run after it, tempi lists nested/.
    pi, mine = case("ls", path="deep", limit=1)
    assert pi["isError"] and not mine.is_error
    assert _text(mine) == "nested/"

    # grep: the same match lines; ignored.txt (gitignored) and .git/ never show up.
    pi, mine = case("grep", pattern="needle", path=".")
    assert _text(mine) == _text(pi["result"])
    pi, mine = case("grep", pattern="a.b", literal=True)
    assert _text(mine) == _text(pi["result"]) == "hay.txt:5: a.b"
    pi, mine = case("grep", pattern="needle", glob="*.md")
    assert _text(mine) == _text(pi["result"])
    pi, mine = case("grep", pattern="--pre=evil")
    assert not mine.is_error and _text(mine) == _text(pi["result"]) == "No matches found"

    # grep with context and a limit: same matches, same limit hint and details. pi also
    # printed a context line 2 for doc.md, which has one line (it split the file on its
    # final newline); ripgrep's context has only real lines.
    pi, mine = case("grep", pattern="NEEDLE", ignoreCase=True, context=1, limit=2)
    match_line = re.compile(r"^[^\s]+:\d+: ")
    assert [line for line in _text(mine).splitlines() if match_line.match(line)] == [
        line for line in _text(pi["result"]).splitlines() if match_line.match(line)
    ]
    assert "hay.txt-2- hay" in _text(mine)
    assert mine.details == pi["result"]["details"] == {"matchLimitReached": 2}
    assert "limit=4" in _text(mine) and "limit=4" in _text(pi["result"])

    # find: pi's fd was too old, so its results are no reference; these are the files of
    # the workspace by the same rules (gitignore honoured, hidden included, sorted).
    assert all(pi_call["isError"] for pi_call in pi_calls if pi_call["name"] == "find")
    _, mine = case("find", pattern="*.txt")
    assert _text(mine).split("\n") == [
        "big.txt", "crlf.txt", "deep/nested/dir/new.txt", "dup.txt", "hay.txt", "quotes.txt", "wide.txt"
    ]  # fmt: skip
    _, mine = case("find", pattern="deep/**/*.txt")
    assert _text(mine) == "deep/nested/dir/new.txt"
    _, mine = case("find", pattern="*.nomatch")
    assert not mine.is_error and "No files found" in _text(mine)
    _, mine = case("find", pattern="*", limit=3)
    assert _without_notice(_text(mine)).split("\n") == [".gitignore", "big.txt", "bin.dat"]
    assert mine.details == {"resultLimitReached": 3} and "limit=6" in _text(mine)

    # Failures are error results in both.
    pi, mine = case("read", path="nope/missing.txt")
    assert mine.is_error and pi["isError"] and "nope/missing.txt" in _text(mine)
    pi, mine = case("edit", path="missing.txt", edits=[{"oldText": "a", "newText": "b"}])
    assert mine.is_error and pi["isError"] and not (workspace / "missing.txt").exists()
    pi, mine = case("bash")
    assert mine.is_error and pi["isError"] and "command" in _text(mine)
    pi, mine = case("write", path="x.txt")
    assert mine.is_error and pi["isError"] and "content" in _text(mine)
    assert not (workspace / "x.txt").exists()
    pi, mine = case("no_such_tool", a=1)
    assert mine.is_error and pi["isError"] and "no_such_tool" in _text(mine)
