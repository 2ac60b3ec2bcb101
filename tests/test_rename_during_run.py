"""Renaming a session (or switching its model) while a run streams or a tool runs keeps
the session file one chain: reopening it (`--continue`, the web console, pi) shows the
whole run, the answer included, under the new name."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client

from tempi.agent.messages import AssistantMessage, ToolResultMessage
from tempi.store.catalog import list_sessions_in
from tempi.store.session_store import SessionStore
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.session_harness import (
    Session,
    assert_single_chain,
    running_worker,
    scripted_model,
    start_session,
    unique_queue,
)

ANSWER = "word " * 100
NEW_NAME = "Renamed mid-run"


async def _file_entries(
    path: str, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 20
) -> list[dict[str, Any]]:
    """The file's lines once `done` holds: a run's last entries are written just after
    the client sees it end."""
    deadline = time.monotonic() + timeout
    while True:
        entries = [json.loads(line) for line in Path(path).read_text().splitlines()]
        if done(entries) or time.monotonic() > deadline:
            return entries
        await asyncio.sleep(0.05)


def _has(kind: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda entries: any(e["type"] == kind for e in entries)


def _names_seen_before_answer(s: Session) -> bool:
    """The rename reached the workflow while the answer was still streaming."""
    kinds = [e["type"] for e in s.events]
    renamed = kinds.index("session_info_changed")
    answered = next(
        i
        for i, e in enumerate(s.events)
        if e["type"] == "message_end" and e["message"]["role"] == "assistant"
    )
    return renamed < answered


def _reopened(tmp: Path, session_path: str) -> tuple[list[Any], str | None]:
    """What reopening the file shows: the messages on its current branch, and its name."""
    loaded = SessionStore(tmp / "sessions").load(Path(session_path))
    return loaded.tree.build_context().messages, loaded.tree.session_name()


async def test_rename_while_the_answer_streams_keeps_the_answer_on_the_branch(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "rename-streaming", [{"text": ANSWER, "chunk_size": 5, "chunk_delay_ms": 20}]
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "rename-streaming"), task_queue=queue
        )
        await s.prompt("Talk a while.")
        await s.collect_until(lambda e: e["type"] == "message_update")
        await s.session.rename(NEW_NAME)
        await s.run_to_idle()
        assert _names_seen_before_answer(s), "the rename landed after the answer: the test proves nothing"
        assert (await s.session.state()).session_name == NEW_NAME
        entries = await _file_entries(s.config.session_path, _has("session_info"))

    assert_single_chain(entries)
    kinds = [e["type"] if e["type"] != "message" else e["message"]["role"] for e in entries[1:]]
    assert kinds == ["model_change", "thinking_level_change", "user", "assistant", "session_info"]
    messages, name = _reopened(tmp_path, s.config.session_path)
    assert name == NEW_NAME
    assert [m.role for m in messages] == ["user", "assistant"]
    assert isinstance(messages[-1], AssistantMessage) and messages[-1].text() == ANSWER
    assert [summary.name for summary in list_sessions_in(tmp_path / "sessions")] == [NEW_NAME]


async def test_rename_and_model_switch_while_a_bash_tool_runs_keep_one_chain(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    # The command waits for a file the test writes once the workflow has taken the rename.
    command = "while [ ! -e go ]; do sleep 0.02; done; echo ran"
    scripted_server.add_scenario(
        "rename-tool",
        [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "The command ran."}],
    )
    queue = unique_queue()
    model = scripted_model(scripted_server, "rename-tool")
    other = model.model_copy(update={"id": "mock-model-2", "name": "mock-model-2"})
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(temporal_client, tmp_path, model, task_queue=queue)
        await s.prompt("Run the command.")
        await s.collect_until(lambda e: e["type"] == "tool_execution_start")
        await s.session.rename(NEW_NAME)
        await s.session.set_model(other, remember=False)
        await s.collect_until(lambda e: e["type"] == "session_info_changed")
        await asyncio.wait_for(_model_is(s, other.id), 20)
        (tmp_path / "work" / "go").touch()
        await s.run_to_idle()
        entries = await _file_entries(
            s.config.session_path, lambda es: sum(e["type"] == "message" for e in es) == 4
        )

    assert_single_chain(entries)
    kinds = [e["type"] if e["type"] != "message" else e["message"]["role"] for e in entries[1:]]
    assert kinds == [
        "model_change",
        "thinking_level_change",
        "user",
        "assistant",
        "toolResult",
        "session_info",
        "model_change",
        "assistant",
    ]
    messages, name = _reopened(tmp_path, s.config.session_path)
    assert name == NEW_NAME
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    assert isinstance(messages[2], ToolResultMessage) and messages[2].content[0].text == "ran\n"
    # The second answer came from the model switched to while the tool ran.
    assert isinstance(messages[3], AssistantMessage) and messages[3].model == other.id


async def _model_is(s: Session, model_id: str) -> None:
    while (await s.session.state()).model.id != model_id:
        await asyncio.sleep(0.02)
