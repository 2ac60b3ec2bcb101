"""Kill the worker process with SIGKILL in the middle of a turn: a new worker finishes the
session, and the session file holds every entry exactly once, in tree order."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import start_tempi_worker, write_models_json
from tests.session_harness import assert_single_chain, scripted_model, start_session, unique_queue

TURNS = 6


async def test_sigkill_worker_mid_turn_then_new_worker_finishes(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    log_file = tmp_path / "work" / "turns.log"
    turns = [
        {
            "text": f"Turn {i} " + "pad " * 30,
            "chunk_size": 8,
            "chunk_delay_ms": 15,
            "tool_calls": [{"name": "bash", "arguments": {"command": f"echo turn-{i} >> {log_file}"}}],
        }
        for i in range(TURNS)
    ]
    scenario = "crash-mid-turn"
    scripted_server.add_scenario(scenario, [*turns, {"text": "All turns done."}])
    home = tmp_path / "home"
    write_models_json(home, scripted_server, scenario)
    queue = unique_queue()
    worker_log = tmp_path / "worker.log"
    worker = start_tempi_worker(home, temporal_address, queue, worker_log)
    try:
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, scenario), task_queue=queue
        )
        await s.prompt("Do the six turns.")
        # Wait until the third assistant message is streaming, then kill the worker.
        await s.collect_until(
            lambda e: e["type"] == "message_update" and "Turn 2" in json.dumps(e["message"]), timeout=60
        )
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        worker = start_tempi_worker(home, temporal_address, queue, worker_log)
        await s.run_to_idle(timeout=90)
    finally:
        worker.kill()
        worker.wait()

    final = [e for e in s.events if e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == "All turns done."
    entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()]
    assert_single_chain(entries)
    roles = [e["message"]["role"] for e in entries if e["type"] == "message"]
    assert roles == ["user"] + ["assistant", "toolResult"] * TURNS + ["assistant"]
    # Every command ran exactly once, none was lost or repeated.
    assert log_file.read_text().splitlines() == [f"turn-{i}" for i in range(TURNS)]
