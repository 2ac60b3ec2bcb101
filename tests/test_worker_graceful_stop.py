"""A worker's life under an orchestrator: `docker stop` or a Kubernetes rollout sends it
SIGTERM, and it stops taking work, lets the command it is running finish and exits, so the
session goes on on the next worker with the command's real result and no model call asked
twice; started before its server, it waits for the server instead of exiting."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path

from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.dev_server import free_port, start_dev_server
from tests.conftest import start_tempi_worker, write_models_json
from tests.session_harness import scripted_model, start_session, unique_queue


async def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        await asyncio.sleep(0.05)


async def test_sigterm_lets_the_running_command_finish_and_the_session_goes_on_elsewhere(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    started = tmp_path / "command-started"
    scenario = "graceful-stop"
    command = f"touch {started}; sleep 1.5; echo built"
    scripted_server.add_scenario(
        scenario,
        [
            {"tool_calls": [{"id": "make", "name": "bash", "arguments": {"command": command}}]},
            {"text": "The build finished."},
        ],
    )
    home = tmp_path / "home"
    write_models_json(home, scripted_server, scenario)
    queue = unique_queue()
    log = tmp_path / "worker.log"
    first = start_tempi_worker(home, temporal_address, queue, log)
    second = None
    try:
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, scenario), task_queue=queue
        )
        await s.prompt("Build it.", timeout=120)
        await _wait_for(started)
        first.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(first.wait, 60)
        second = start_tempi_worker(home, temporal_address, queue, log)
        await s.run_to_idle(timeout=120)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()

    said = log.read_text()
    assert code == 0, said
    assert "stopping: no new work is taken" in said and "tempi worker: stopped" in said
    entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()]
    results = [
        e["message"] for e in entries if e["type"] == "message" and e["message"]["role"] == "toolResult"
    ]
    assert len(results) == 1 and not results[0]["isError"], results
    assert "built" in results[0]["content"][0]["text"]
    # The model answered each turn once: no call was repeated after the worker left.
    assert len(scripted_server.requests_for(scenario)) == 2
    assert s.roles()[-1] == "assistant"


def test_a_worker_started_before_its_server_waits_for_it_instead_of_exiting(tmp_path: Path) -> None:
    port = free_port()
    home = tmp_path / "home"
    log = tmp_path / "worker.log"
    worker = start_tempi_worker(home, f"127.0.0.1:{port}", unique_queue(), log)
    server = None
    try:
        _wait_for_text(log, "Trying again in", worker)
        server = start_dev_server(tmp_path / "temporal.db", port, log_path=tmp_path / "server.log")
        _wait_for_text(log, "tempi worker: polling", worker)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0, log.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        if server is not None:
            server.terminate()
            server.wait(30)
    assert "Cannot reach the Temporal server at" in log.read_text()


def _wait_for_text(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in (log.read_text() if log.exists() else ""):
        assert proc.poll() is None, f"the worker exited ({proc.returncode}): {log.read_text()}"
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
