"""A fresh versioned install does not hang: the first `tempi worker` of a Worker Deployment
with no current build makes its own build current, and a client whose sessions could start
on no worker (versioned workers, no current build) says so when it starts."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from tempi.cli.runtime import _say_if_no_worker
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.first_build import adopt_if_first
from tempi.workers.worker import build_id, build_worker
from tests.conftest import start_tempi_worker, write_models_json
from tests.session_harness import fixed_credentials, scripted_model, start_session, unique_queue


async def test_the_first_worker_of_a_new_deployment_makes_its_build_current(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "first-build"
    scripted_server.add_scenario(scenario, [{"text": "answered on the first build"}])
    home = tmp_path / "home"
    write_models_json(home, scripted_server, scenario)
    deployment = f"fresh-{uuid.uuid4().hex[:8]}"
    queue = unique_queue()
    log = tmp_path / "worker.log"
    worker = start_tempi_worker(
        home, temporal_address, queue, log, TEMPI_DEPLOYMENT_NAME=deployment, TEMPI_BUILD_ID="first"
    )
    try:
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, scenario), task_queue=queue
        )
        await s.prompt("hello", timeout=60)
        events = await s.run_to_idle(timeout=60)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)
    final = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == "answered on the first build"
    assert f"deployment {deployment} had no current build: made first current" in log.read_text()


async def test_a_client_says_when_its_sessions_could_start_on_no_worker(
    tmp_path: Path, temporal_client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    deployment = f"unrouted-{uuid.uuid4().hex[:8]}"
    queue = unique_queue()
    # Versioned workers, and no build made current (as a fresh install had it).
    worker = build_worker(
        temporal_client,
        task_queue=queue,
        sessions_root=tmp_path / "sessions",
        credentials=fixed_credentials,
        deployment=deployment,
    )
    said = ""
    async with worker:
        deadline = time.monotonic() + 30
        while "no current build" not in said:
            assert time.monotonic() < deadline, said
            await _say_if_no_worker(temporal_client, "the server", queue)
            said = capsys.readouterr().err
            await asyncio.sleep(0.2)
        assert f"belong to Worker Deployment {deployment}, which has no current build" in said
        assert f"set-current-version --deployment-name {deployment}" in said
        # With a current build there is a worker for new sessions: nothing to say.
        assert await adopt_if_first(temporal_client, deployment, build_id())
        await _say_if_no_worker(temporal_client, "the server", queue)
        assert capsys.readouterr().err == ""
