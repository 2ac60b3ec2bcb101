"""A session that waits for a prompt longer than its idle time closes by itself (it used to
wait a week, holding its sandbox container and its build pin): its file stays whole, its
container is removed, and `--continue` carries it on. The idle time comes from
settings.json's `sessionIdleCloseMinutes` or `TEMPI_SESSION_IDLE_CLOSE_MINUTES`; a `-p` run's
session closes after ten idle minutes unless told otherwise."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from tempi.activities.sandbox import SESSION_LABEL
from tempi.client import SessionClient
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows.session_types import workflow_id_for
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.docker_support import docker_client, open_host_dir, sandbox_image  # noqa: F401 (fixtures)
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue
from tests.test_rpc_mode import RpcProcess


async def _wait_closed(
    client: Client, session_id: str, timeout: float = 30
) -> WorkflowExecutionStatus | None:
    handle = client.get_workflow_handle(workflow_id_for(session_id))
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = (await handle.describe()).status
        if status != WorkflowExecutionStatus.RUNNING:
            return status
        await asyncio.sleep(0.2)
    return status


def _messages(path: Path) -> list[tuple[str, str]]:
    return [
        (e["message"]["role"], e["message"]["content"][0]["text"])
        for e in map(json.loads, path.read_text().splitlines()[1:])
        if e["type"] == "message"
    ]


async def test_an_idle_session_closes_by_itself_and_goes_on_from_its_file(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    scenario = "idle-close"
    scripted_server.add_scenario(
        scenario, [{"text": "First answer."}, {"text": "Second answer."}, {"text": "Third answer."}]
    )
    write_models_json(home, scripted_server, scenario)
    (home / "settings.json").write_text(json.dumps({"sessionIdleCloseMinutes": 0.05}))  # 3 s
    env = tempi_env(home, temporal_address)

    # An RPC client keeps its session open when a run ends; the idle time closes it.
    rpc = RpcProcess(["--model", "mock/mock-model"], cwd=work, env=env)
    try:
        state = rpc.call({"id": "s", "type": "get_state"})["data"]
        assert rpc.call({"id": "p1", "type": "prompt", "message": "one"})["success"]
        rpc.event("agent_end")
        started = time.monotonic()
        status = await _wait_closed(temporal_client, state["sessionId"])
        closed_after = time.monotonic() - started
        path = Path(state["sessionFile"])
        file_when_closed = _messages(path)
        # The client still showing it sends the next prompt: the session goes on from its file.
        assert rpc.call({"id": "p2", "type": "prompt", "message": "two"}) == {
            "id": "p2",
            "type": "response",
            "command": "prompt",
            "success": True,
        }
        end = rpc.event("agent_end")
    finally:
        rpc.close()
    assert status == WorkflowExecutionStatus.COMPLETED, status
    assert 2 < closed_after < 15, closed_after
    assert file_when_closed == [("user", "one"), ("assistant", "First answer.")]
    assert end["messages"][-1]["content"][0]["text"] == "Second answer."

    third = run_tempi(["--model", "mock/mock-model", "-c", "-p", "three"], cwd=work, env=env)
    assert third.returncode == 0, third.stderr
    assert third.stdout.strip() == "Third answer."
    assert _messages(path) == [
        ("user", "one"),
        ("assistant", "First answer."),
        ("user", "two"),
        ("assistant", "Second answer."),
        ("user", "three"),
        ("assistant", "Third answer."),
    ]


def test_a_bad_idle_time_in_the_environment_is_a_clear_error(tmp_path: Path, temporal_address: str) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    env = tempi_env(home, temporal_address, TEMPI_SESSION_IDLE_CLOSE_MINUTES="an hour")
    run = run_tempi(["--model", "faux/demo", "-p", "hi"], cwd=work, env=env)
    assert run.returncode != 0
    assert "TEMPI_SESSION_IDLE_CLOSE_MINUTES='an hour' is not a number of minutes" in run.stderr, run.stderr


def _containers(client: Any, session_id: str) -> list[Any]:
    return client.containers.list(all=True, filters={"label": f"{SESSION_LABEL}={session_id}"})


async def _wait_for_status(client: Any, session_id: str, status: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if [c.status for c in _containers(client, session_id)] == [status]:
            return True
        await asyncio.sleep(0.2)
    return False


async def test_an_idle_docker_session_stops_then_removes_its_container(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    docker_client: Any,  # noqa: F811
    sandbox_image: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The worker's owner lets its sandboxes stop after 3 s without a tool process.
    home = tmp_path / "tempi-home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"dockerSandbox": {"idleStopSeconds": 3}}))
    monkeypatch.setenv("TEMPI_HOME", str(home))
    scripted_server.add_scenario(
        "idle-docker",
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "echo kept > note.txt"}}]},
            {"text": "done"},
        ],
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue, host_sandboxes=True):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "idle-docker"),
            task_queue=queue,
            sandbox="docker",
            sandbox_image=sandbox_image,
            idle_close_s=12,
        )
        open_host_dir(Path(s.config.cwd))
        await s.prompt("work in the sandbox")
        await s.run_to_idle(timeout=90)
        # Waiting for a prompt, the container stops (kept for the next tool call)...
        assert await _wait_for_status(docker_client, s.config.session_id, "exited")
        # ...and once the session closes, it is gone.
        status = await _wait_closed(temporal_client, s.config.session_id)
    assert status == WorkflowExecutionStatus.COMPLETED
    assert _containers(docker_client, s.config.session_id) == []
    assert (Path(s.config.cwd) / "note.txt").read_text() == "kept\n"


async def test_a_print_runs_session_closes_after_ten_idle_minutes_unless_told_otherwise(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    scenario = "one-shot-idle"
    scripted_server.add_scenario(scenario, [{"text": "First."}, {"text": "Second."}])
    write_models_json(home, scripted_server, scenario)
    args = ["--model", "mock/mock-model"]

    async def idle_close_of_last_run(*more: str, **env: str) -> float | None:
        run = await asyncio.to_thread(
            run_tempi, [*args, *more], cwd=work, env=tempi_env(home, temporal_address, **env)
        )
        assert run.returncode == 0, run.stderr
        [path] = list((home / "sessions").rglob("*.jsonl"))
        session_id = json.loads(path.read_text().splitlines()[0])["id"]
        handle = temporal_client.get_workflow_handle(workflow_id_for(session_id))
        await handle.terminate()  # the next run continues the file in a workflow of its own
        return (await SessionClient(temporal_client, session_id).running_config()).idle_close_s

    # A one-shot run keeps its session for ten minutes (to attach, steer or continue it),
    # not a week; an operator's setting wins.
    assert await idle_close_of_last_run("-p", "one") == 600
    assert await idle_close_of_last_run("-c", "-p", "two", TEMPI_SESSION_IDLE_CLOSE_MINUTES="0") == 0
