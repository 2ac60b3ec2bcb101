"""bash, grep and find start inside the workflow task: a call that ends within a moment costs
its turn no server round trip of its own, a longer one is awaited on its worker's own queue,
and a command whose worker is lost as it starts is not run again by the next worker."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import start_tempi_worker, write_models_json
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue


def _bash(command: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


async def test_quick_calls_run_in_the_workflow_task_and_a_slow_one_is_awaited(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "handoff-quick-and-slow"
    scripted_server.add_scenario(
        scenario,
        [
            _bash("echo quick"),
            {"tool_calls": [{"name": "grep", "arguments": {"pattern": "needle", "path": "."}}]},
            _bash("sleep 1; echo slow"),
            {"text": "Done."},
        ],
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, scenario),
            task_queue=queue,
            tools=["bash", "grep"],
        )
        (Path(s.config.cwd) / "hay.txt").write_text("a needle here\n")
        await s.prompt("Run them.")
        await s.run_to_idle(timeout=60)

    results = [e for e in s.events if e["type"] == "tool_execution_end"]
    assert [r["result"]["content"][0]["text"].strip() for r in results] == [
        "quick",
        "hay.txt:1: a needle here",
        "slow",
    ]
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        async for e in s.handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    # Only the model calls, the one command still running after a moment and the final flush
    # of the session file left the workflow task.
    assert sorted(scheduled) == ["await_tool", *["call_llm"] * 4, "flush_entries"]
    marks = Path(s.config.session_path).parent / ".tempi"
    assert not list(marks.rglob("started/*")), "a finished command left its start mark behind"


@pytest.mark.slow
async def test_a_command_whose_worker_is_lost_as_it_starts_is_not_run_again(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    ran = tmp_path / "ran.log"
    scenario = "handoff-lost-worker"
    scripted_server.add_scenario(scenario, [_bash(f"echo ran >> {ran}; sleep 4"), {"text": "Carried on."}])
    home = tmp_path / "home"
    write_models_json(home, scripted_server, scenario)
    queue = unique_queue()
    # The command stays inside the workflow task for its whole run, where the kill lands.
    env = {"TEMPI_BRIEF_TOOL_SECONDS": "60"}
    worker = start_tempi_worker(home, temporal_address, queue, tmp_path / "worker.log", **env)
    try:
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, scenario), task_queue=queue
        )
        await s.prompt("Run it.")
        # Not the tool's start event: queries wait while the workflow task is open.
        async with asyncio.timeout(60):
            while not ran.exists():
                await asyncio.sleep(0.05)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        worker = start_tempi_worker(home, temporal_address, queue, tmp_path / "worker.log", **env)
        await s.run_to_idle(timeout=90)
    finally:
        worker.kill()
        worker.wait()

    assert ran.read_text().splitlines() == ["ran"], "the command ran again after its worker was lost"
    result = next(e for e in s.events if e["type"] == "tool_execution_end")
    assert result["isError"] is True
    assert "may or may not have completed" in json.dumps(result["result"])
    assert [e for e in s.events if e["type"] == "message_end"][-1]["message"]["content"][0]["text"] == (
        "Carried on."
    )
