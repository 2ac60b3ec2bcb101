"""A local file tool that cannot keep its result (the disk under the session's side folder is
full) is a tool error the model reads, and the session goes on: it used to fail the whole
session, because a local activity's failure reaches the workflow unwrapped (found by the
chaos disk-full scenario, issue 13). A read the model call runs itself (tempi/activities/
early_reads.py) that cannot park its result is run again as a tool call, with the same end."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from tempi.store.sidecar import sidecar_dir
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.full_disk import full_disk_at
from tests.session_harness import (
    assert_single_chain,
    running_worker,
    scripted_model,
    start_session,
    unique_queue,
)

FIRST_CALLS = {
    "write": {"name": "write", "arguments": {"path": "a.txt", "content": "one\n"}},
    "read": {"name": "read", "arguments": {"path": "a.txt"}},
}


@pytest.mark.parametrize("tool", list(FIRST_CALLS))
async def test_a_full_disk_under_a_local_tool_is_a_tool_error_and_the_session_goes_on(
    tool: str, tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = f"local-tool-disk-full-{tool}"
    scripted_server.add_scenario(
        scenario,
        [
            {"tool_calls": [FIRST_CALLS[tool]]},
            {"text": "The disk was full."},
            {"tool_calls": [{"name": "write", "arguments": {"path": "b.txt", "content": "two\n"}}]},
            {"text": "b.txt written."},
        ],
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, scenario),
            task_queue=queue,
        )
        (Path(s.config.cwd) / "a.txt").write_text("one\n")
        pending = sidecar_dir(s.config.session_path, s.config.session_id) / "pending"
        with full_disk_at(pending) as filler:
            await s.prompt(f"{tool.capitalize()} a.txt.")
            # Bounded: before the fix the workflow failed and no run ever ended.
            events = await asyncio.wait_for(s.run_to_idle(), 60)
            description = await s.handle.describe()
            assert description.status == WorkflowExecutionStatus.RUNNING
            ends = [e for e in events if e["type"] == "tool_execution_end"]
            assert len(ends) == 1 and ends[0]["isError"]
            assert "No space left on the device holding" in ends[0]["result"]["content"][0]["text"]
            final = [e for e in events if e["type"] == "message_end"][-1]["message"]
            assert final["content"][0]["text"] == "The disk was full."

            # Space again: the next prompt's tool keeps its result as usual.
            filler.unlink()
            await s.prompt("Now write b.txt.")
            events = await asyncio.wait_for(s.run_to_idle(), 60)
    ends = [e for e in events if e["type"] == "tool_execution_end"]
    assert len(ends) == 1 and not ends[0]["isError"]
    assert (tmp_path / "work" / "b.txt").read_text() == "two\n"

    entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()]
    assert_single_chain(entries)
    results = [e["message"] for e in entries[1:] if e.get("message", {}).get("role") == "toolResult"]
    assert [(r["toolName"], r["isError"]) for r in results] == [(tool, True), ("write", False)]
    assert "Free some space" in results[0]["content"][0]["text"]
