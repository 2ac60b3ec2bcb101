"""Sessions carry on: a file written by pi continues in tempi, and a long-lived session
workflow continues as new between prompts without losing its place."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows.session_types import EventsPage
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.fixture_paths import PI_FIXTURES
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue


def test_a_pi_session_file_continues_in_tempi(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "resume-pi", {"select": "sequential", "turns": [{"text": "Continuing pi's work."}]}
    )
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "resume-pi")
    pi_file = tmp_path / "pi-session.jsonl"
    shutil.copy(PI_FIXTURES / "sessions" / "basic-openai.jsonl", pi_file)
    before = pi_file.read_text().splitlines()

    proc = run_tempi(
        ["--session", str(pi_file), "--model", "mock/mock-model", "-p", "what did we do?"],
        cwd=tmp_path,
        env=tempi_env(home, temporal_address),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Continuing pi's work.\n"
    # The model saw pi's conversation.
    sent = json.dumps(scripted_server.requests_for("resume-pi")[-1].body["messages"])
    assert "Create hello.py that prints hello" in sent and "Done. hello.py now prints hi." in sent
    # pi's lines are untouched; tempi's entries continue the tree from pi's last entry.
    after = pi_file.read_text().splitlines()
    assert after[: len(before)] == before
    added = [json.loads(line) for line in after[len(before) :]]
    assert [e["message"]["role"] for e in added if e["type"] == "message"] == ["user", "assistant"]
    assert added[0]["parentId"] == json.loads(before[-1])["id"]


async def test_session_continues_as_new_between_prompts(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "can", {"select": "sequential", "turns": [{"text": f"answer {i}"} for i in range(4)]}
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "can"),
            task_queue=queue,
            history_event_budget=10,
        )
        for i in range(4):
            await s.prompt(f"question {i}")
            await s.run_to_idle()
        runs = [w async for w in temporal_client.list_workflows(f'WorkflowId = "{s.handle.id}"')]
    assert len(runs) >= 4  # a new run after every prompt
    answers = [
        e["message"]["content"][0]["text"]
        for e in s.events
        if e["type"] == "message_end" and e["message"]["role"] == "assistant"
    ]
    assert answers == [f"answer {i}" for i in range(4)]
    # Every run built its context from the file: the last request saw all earlier turns.
    last = json.dumps(scripted_server.requests_for("can")[-1].body["messages"])
    assert all(f"question {i}" in last and (i == 3 or f"answer {i}" in last) for i in range(4))
    entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()]
    ids = [e["id"] for e in entries[1:]]
    assert len(ids) == len(set(ids))


async def test_a_run_that_continued_as_new_still_reads_its_own_log(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    """A watcher can reach the old run just after continue-as-new; its log must read as
    it was, not as the next run's offsets (once, that made followers replay old events)."""
    # Enough tool output that the next run is handed only the tail of the log.
    reads = [{"tool_calls": [{"name": "read", "arguments": {"path": "big.txt"}}]}] * 5
    scripted_server.add_scenario("can-old", {"select": "sequential", "turns": [*reads, {"text": "done"}]})
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "can-old"),
            task_queue=queue,
            history_event_budget=10,
        )
        (Path(s.config.cwd) / "big.txt").write_text("x" * 40_000)
        await s.prompt("question")
        events = await s.run_to_idle()
        runs = [w async for w in temporal_client.list_workflows(f'WorkflowId = "{s.handle.id}"')]
        old = next(r for r in runs if r.status == WorkflowExecutionStatus.CONTINUED_AS_NEW)
        old_handle = temporal_client.get_workflow_handle(s.handle.id, run_id=old.run_id)
        whole = await old_handle.query("read_events", 0, result_type=EventsPage)
        at_end = await old_handle.query("read_events", whole.next_offset, result_type=EventsPage)
        newest = await s.handle.query("read_events", whole.next_offset, result_type=EventsPage)
    assert whole.base_offset == 0 and whole.events[-1]["type"] == "agent_end"
    assert [e["type"] for e in whole.events] == [e["type"] for e in events if e["type"] != "message_update"]
    assert (at_end.next_offset, at_end.events) == (whole.next_offset, [])
    # The new run continues the same numbering.
    assert (newest.next_offset, newest.events) == (whole.next_offset, [])
