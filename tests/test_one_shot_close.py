"""A `tempi -p` run closes the session it started when it is done (it used to stay Running
for a week, holding its sandbox container and build pin); `--continue` starts it again from
its file, and a session that was already running before the run is left running."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows.session_types import DEFAULT_TASK_QUEUE, workflow_id_for
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.session_harness import running_worker, scripted_model, start_session


def _session_file(home: Path) -> Path:
    [path] = list((home / "sessions").rglob("*.jsonl"))
    return path


async def _status(client: Client, path: Path) -> WorkflowExecutionStatus | None:
    session_id = json.loads(path.read_text().splitlines()[0])["id"]
    return (await client.get_workflow_handle(workflow_id_for(session_id)).describe()).status


async def test_a_print_run_closes_its_session_and_continue_reopens_it(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    scenario = "one-shot-close"
    scripted_server.add_scenario(scenario, [{"text": "First answer."}, {"text": "Second answer."}])
    write_models_json(home, scripted_server, scenario)
    env = tempi_env(home, temporal_address)
    args = ["--model", "mock/mock-model"]

    first = run_tempi([*args, "-p", "one"], cwd=work, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "First answer."
    path = _session_file(home)
    assert await _status(temporal_client, path) == WorkflowExecutionStatus.COMPLETED

    second = run_tempi([*args, "-c", "-p", "two"], cwd=work, env=env)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "Second answer."
    assert _session_file(home) == path
    messages = [
        (e["message"]["role"], e["message"]["content"][0]["text"])
        for e in map(json.loads, path.read_text().splitlines()[1:])
        if e["type"] == "message"
    ]
    assert messages == [
        ("user", "one"),
        ("assistant", "First answer."),
        ("user", "two"),
        ("assistant", "Second answer."),
    ]
    assert await _status(temporal_client, path) == WorkflowExecutionStatus.COMPLETED


async def test_a_print_run_leaves_a_session_that_was_already_running_running(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "one-shot-join"
    scripted_server.add_scenario(scenario, [{"text": "From the print run."}])
    home = tmp_path / "home"
    write_models_json(home, scripted_server, scenario)
    async with running_worker(temporal_client, tmp_path / "sessions", DEFAULT_TASK_QUEUE):
        s = await start_session(temporal_client, tmp_path, scripted_model(scripted_server, scenario))
        path = Path(s.config.session_path)
        run = await asyncio.to_thread(
            run_tempi,
            ["--model", "mock/mock-model", "--session", str(path), "-p", "hello"],
            cwd=Path(s.config.cwd),
            env=tempi_env(home, temporal_address),
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == "From the print run."
        assert await s.session.is_running()
        await s.session.shutdown(wait_s=10)
