"""File names that are not valid UTF-8: every tool shows them as `\\xHH` escapes and takes
that form back, so a model can list, find, grep, read, write and edit such a file, and one
odd name never hides the rest of a directory."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from tempi.activities.tools import ToolContext, ToolOutcome, execute_tool
from tempi.activities.tools.bwrap_backend import BwrapBackend
from tempi.activities.tools.local_backend import LocalBackend
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue

RAW = b"bad\xff.txt"  # 0xff never occurs in UTF-8
SHOWN = "bad\\xff.txt"  # as the tools show it, and as a model writes it back
CONTENT = b"needle in the odd file\n"


def _text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


def _make_workspace(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "good.txt").write_text("needle in a good file\n")
    (root / "sub").mkdir()
    with open(os.path.join(os.fsencode(root), RAW), "wb") as handle:
        handle.write(CONTENT)
    return root


@pytest.fixture(params=["local", "bwrap"])
def ctx(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ToolContext]:
    workspace = _make_workspace(tmp_path / "ws")
    backend = LocalBackend() if request.param == "local" else BwrapBackend(str(workspace))
    yield ToolContext(cwd=str(workspace), backend=backend, spill_dir=str(tmp_path / "spill"))


def _names(workspace: str) -> set[bytes]:
    return set(os.listdir(os.fsencode(workspace)))


async def test_ls_lists_the_whole_directory_with_the_name_escaped(ctx: ToolContext) -> None:
    outcome = await execute_tool("ls", {}, ctx)
    assert not outcome.is_error, _text(outcome)
    assert _text(outcome).splitlines() == [SHOWN, "good.txt", "sub/"]
    json.dumps(outcome.to_json_dict(), ensure_ascii=False).encode("utf-8")  # storable as is


async def test_find_and_grep_show_the_same_escaped_name(ctx: ToolContext) -> None:
    found = await execute_tool("find", {"pattern": "*.txt"}, ctx)
    assert not found.is_error, _text(found)
    assert sorted(_text(found).splitlines()) == [SHOWN, "good.txt"]
    grepped = await execute_tool("grep", {"pattern": "needle"}, ctx)
    assert not grepped.is_error, _text(grepped)
    assert f"{SHOWN}:1: needle in the odd file" in _text(grepped).splitlines()
    assert "\ufffd" not in _text(found) + _text(grepped)


async def test_read_write_and_edit_take_the_escaped_name(ctx: ToolContext) -> None:
    read = await execute_tool("read", {"path": SHOWN}, ctx)
    assert not read.is_error, _text(read)
    assert _text(read) == CONTENT.decode()

    raw_path = os.path.join(os.fsencode(ctx.cwd), RAW)
    wrote = await execute_tool("write", {"path": SHOWN, "content": "one\ntwo\n"}, ctx)
    assert not wrote.is_error, _text(wrote)
    edited = await execute_tool("edit", {"path": SHOWN, "edits": [{"oldText": "two", "newText": "2"}]}, ctx)
    assert not edited.is_error, _text(edited)
    with open(raw_path, "rb") as handle:
        assert handle.read() == b"one\n2\n"
    # The file with the odd byte changed; no file with a literal backslash appeared.
    assert _names(ctx.cwd) == {RAW, b"good.txt", b"sub"}


async def test_a_session_lists_and_reads_a_file_with_an_odd_name(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    """Through the worker and the session file: results must be storable, the name usable."""
    scripted_server.add_scenario(
        "odd-names",
        [
            {
                "tool_calls": [
                    {"name": "ls", "arguments": {}},
                    {"name": "find", "arguments": {"pattern": "*.txt"}},
                ]
            },
            {"tool_calls": [{"name": "read", "arguments": {"path": SHOWN}}]},
            {"text": "done"},
        ],
    )
    _make_workspace(tmp_path / "work")
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        session = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "odd-names"),
            task_queue=queue,
            tools=["read", "ls", "find"],
        )
        await session.prompt("look around")
        await session.run_to_idle(timeout=60)
    results = [
        e["message"]
        for e in session.events
        if e["type"] == "message_end" and e["message"]["role"] == "toolResult"
    ]
    texts = {r["toolName"]: "".join(b.get("text", "") for b in r["content"]) for r in results}
    assert not any(r["isError"] for r in results), results
    assert texts["ls"].splitlines() == [SHOWN, "good.txt", "sub/"]
    assert SHOWN in texts["find"].splitlines()
    assert texts["read"] == CONTENT.decode()
    assert session.roles()[-1] == "assistant"
    session_file = next((tmp_path / "sessions").rglob("*.jsonl")).read_bytes()
    session_file.decode("utf-8")  # strict: nothing undecodable was written
