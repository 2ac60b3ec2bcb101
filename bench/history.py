"""Workflow history per turn and the largest history of a long session (1,000 turns;
200 with --quick): what Temporal stores, measured as the events' protobuf size."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.report import print_table
from bench.rig import DevServer, ScriptedServerProcess, WorkerProcess, write_models_json
from bench.sessions import scripted_turns, start_direct_session, wait_all_done
from tempi.workers.temporal_client import connect


async def history_sizes(client: Client, workflow_id: str) -> list[dict[str, int]]:
    """Bytes and events of every run of a workflow (continue-as-new makes several)."""
    runs = []
    async for execution in client.list_workflows(f'WorkflowId = "{workflow_id}"'):
        history = await client.get_workflow_handle(workflow_id, run_id=execution.run_id).fetch_history()
        runs.append({"bytes": sum(e.ByteSize() for e in history.events), "events": len(history.events)})
    return runs


async def run(quick: bool, profile: bool = False) -> dict[str, Any]:
    del profile
    turns = 200 if quick else 1000
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-history-"))
    home = tmp / "home"
    scenario = f"history-{turns}"
    with (
        ScriptedServerProcess(tmp / "llm", {scenario: scripted_turns("tool", turns)}) as llm,
        DevServer(tmp / "temporal") as dev,
    ):
        write_models_json(home, llm.base_url, scenario)
        worker = WorkerProcess(
            home, dev.address, "bench-history", log=tmp / "worker.log", timings=tmp / "t.jsonl"
        )
        worker.start()
        try:
            worker.wait_ready()
            client = await connect(dev.address)
            started = time.monotonic()
            session = await start_direct_session(client, "bench-history", tmp, llm.url_for(scenario))
            await wait_all_done([session.session_path], timeout_s=turns * 2 + 60)
            elapsed = time.monotonic() - started
            # Let the workflow's last flush land so the history is complete.
            await _settle(client, session.handle.id)
            runs = await history_sizes(client, session.handle.id)
        finally:
            worker.stop()
    total_bytes = sum(r["bytes"] for r in runs)
    total_events = sum(r["events"] for r in runs)
    largest = max(runs, key=lambda r: r["bytes"])
    results = {
        "turns": turns,
        "seconds": round(elapsed, 1),
        "runs": len(runs),
        "bytes_per_turn": round(total_bytes / turns),
        "events_per_turn": round(total_events / turns, 2),
        "largest_run_bytes": largest["bytes"],
        "largest_run_events": max(r["events"] for r in runs),
        "total_bytes": total_bytes,
        "total_events": total_events,
        "session_file_bytes": session.session_path.stat().st_size,
    }
    print_table(
        f"Workflow history of a {turns}-turn session (read-tool turns)",
        [
            "turns",
            "runs",
            "bytes/turn",
            "events/turn",
            "largest run bytes",
            "largest run events",
            "session file bytes",
            "seconds",
        ],
        [
            [
                turns,
                len(runs),
                results["bytes_per_turn"],
                results["events_per_turn"],
                largest["bytes"],
                results["largest_run_events"],
                results["session_file_bytes"],
                results["seconds"],
            ]
        ],
    )
    shutil.rmtree(tmp, ignore_errors=True)
    return results


async def _settle(client: Client, workflow_id: str, timeout_s: float = 10) -> None:
    import asyncio

    from temporalio.api.enums.v1 import EventType

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        last = history.events[-1].event_type if history.events else None
        if last == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            return
        await asyncio.sleep(0.2)
