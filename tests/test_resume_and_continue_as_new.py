"""Sessions carry on: a file written by pi continues in tempi, and a long-lived session
workflow continues as new between prompts without losing its place."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.worker import WORKFLOWS
from tempi.workers.workflow_runner import workflow_runner
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


async def test_every_run_of_a_session_reads_its_log_with_the_same_offsets(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    """A watcher can reach an old run just after continue-as-new; that run's log must read
    at the offsets it had, not the next run's (once, that made followers replay events)."""
    # Enough tool output that each new run is handed only the tail of the log.
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
        pages = [await s.session.read_events(0, run_id=run.run_id) for run in runs]
    # The whole log as the watcher saw it; live-only events are not in the log.
    log = [e["type"] for e in events if e["type"] not in ("message_update", "tool_execution_update")]
    assert log[-1] == "agent_end"
    assert sum(1 for r in runs if r.status == WorkflowExecutionStatus.CONTINUED_AS_NEW) >= 2
    assert any(page.base_offset > 0 for page in pages), "no run was handed only a tail"
    for page in pages:
        assert [e["type"] for e in page.events] == log[page.base_offset : page.next_offset]


async def test_one_long_prompt_continues_as_new_between_its_turns(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    """An autonomous run of thousands of turns would outgrow one workflow history, so a
    run hands off to a new workflow run between turns; a watcher sees one unbroken run."""
    reads = [{"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]}] * 12
    scripted_server.add_scenario(
        "can-mid-run",
        {"select": "sequential", "turns": [*reads, {"text": "read them all"}, {"text": "followed up"}]},
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "can-mid-run"),
            task_queue=queue,
            history_event_budget=40,
        )
        (Path(s.config.cwd) / "notes.txt").write_text("a note\n")
        await s.prompt("Read the notes many times.")
        await s.session.follow_up("One more thing.")  # queued across the hand-offs
        events = await s.run_to_idle()
        runs = [w async for w in temporal_client.list_workflows(f'WorkflowId = "{s.handle.id}"')]
    assert len(runs) >= 3, "the prompt should have been handed off mid-run at least twice"
    kinds = [e["type"] for e in events]
    assert (kinds.count("agent_start"), kinds.count("agent_end"), kinds.count("turn_start")) == (1, 1, 14)
    assert kinds.count("tool_execution_end") == 12
    ends = [e["message"] for e in events if e["type"] == "message_end"]
    assert [m["role"] for m in ends] == [
        "user",
        *["assistant", "toolResult"] * 12,
        "assistant",
        "user",
        "assistant",
    ]
    assert ends[-1]["content"][0]["text"] == "followed up"
    assert events[-1]["messages"] == ends  # agent_end lists the whole run
    # The file holds every message once, each entry a child of the one before.
    entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()][1:]
    assert [e["parentId"] for e in entries[1:]] == [e["id"] for e in entries[:-1]]
    assert [e["message"]["role"] for e in entries if e["type"] == "message"] == [m["role"] for m in ends]
    # Every new run built the next request from the file: the last one saw all 12 reads.
    last = scripted_server.requests_for("can-mid-run")[-1].body["messages"]
    assert sum(1 for m in last if m["role"] == "tool") == 12
    # Each run's history replays on the current code: a worker restarted mid-run resumes it.
    replayer = Replayer(
        workflows=WORKFLOWS,
        workflow_runner=workflow_runner(pydantic_data_converter),
        data_converter=pydantic_data_converter,
    )
    for run in runs:
        history = await temporal_client.get_workflow_handle(s.handle.id, run_id=run.run_id).fetch_history()
        # The idle run the last one handed over to may not have had a workflow task yet,
        # and a replayer waits forever for one.
        if any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in history.events):
            await replayer.replay_workflow(history)
