"""A long session keeps workflow history small: tool results reach history once, the
conversation stays in the session store, and runs continue as new when they grow."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHistory

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue

# A slow end-to-end group: see tests/conftest.py.
pytestmark = pytest.mark.slow

TURNS = int(os.environ.get("TEMPI_LONG_SESSION_TURNS", "300"))
RESULT_BYTES = 20_000
HISTORY_LIMIT_BYTES = 10_000_000


async def _history_sizes(client: Client, workflow_id: str) -> list[tuple[int, int]]:
    """(bytes, events) of every run of the workflow, newest first. Bytes are the events'
    protobuf size, what Temporal's history limits count (the JSON export inflates
    payloads with base64)."""
    sizes = []
    async for execution in client.list_workflows(f'WorkflowId = "{workflow_id}"'):
        handle = client.get_workflow_handle(workflow_id, run_id=execution.run_id)
        history: WorkflowHistory = await handle.fetch_history()
        sizes.append((sum(e.ByteSize() for e in history.events), len(history.events)))
    return sizes


async def test_long_session_with_big_tool_results_keeps_history_small(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = f"long-{TURNS}"
    turns = [{"tool_calls": [{"name": "read", "arguments": {"path": "big.txt"}}]} for _ in range(TURNS)]
    scripted_server.add_scenario(scenario, [*turns, {"text": "Read it all."}])
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, scenario), task_queue=queue
        )
        (Path(s.config.cwd) / "big.txt").write_text(("x" * 99 + "\n") * (RESULT_BYTES // 100))
        await s.prompt("Read big.txt again and again.")
        events = await s.run_to_idle(timeout=1200)
        sizes = await _history_sizes(temporal_client, s.handle.id)
    final = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert final["content"] and final["content"][0].get("text") == "Read it all.", final
    largest_bytes, largest_events = max(sizes)
    print(
        f"\n{TURNS} turns x {RESULT_BYTES} B results: largest run history {largest_bytes} B, "
        f"{max(e for _, e in sizes)} events, {len(sizes)} run(s)"
    )
    # Each result crosses history once: about TURNS x RESULT_BYTES, never the square.
    assert largest_bytes < HISTORY_LIMIT_BYTES
    assert largest_bytes < TURNS * RESULT_BYTES * 1.2 + 1_000_000
    assert largest_events < 51_200
    tool_results = sum(1 for e in events if e["type"] == "tool_execution_end")
    assert tool_results == TURNS
