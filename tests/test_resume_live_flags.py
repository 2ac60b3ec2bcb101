"""Resuming a session whose workflow is still running, with flags that differ from how it
runs (issue 19 item 4): what can change is applied, what cannot is refused, never dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json

pytestmark = pytest.mark.slow


def test_a_live_session_takes_a_new_model_and_refuses_a_new_sandbox(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    outside = tmp_path / "written-outside-the-workspace"
    scenario = "resume-live-flags"
    scripted_server.add_scenario(
        scenario,
        [
            {"text": "one"},
            {"text": "two"},
            {"tool_calls": [{"name": "bash", "arguments": {"command": f"touch {outside}"}}]},
            {"text": "done"},
        ],
    )
    write_models_json(home, scripted_server, scenario)
    models = json.loads((home / "models.json").read_text())
    second = dict(models["providers"]["mock"]["models"][0], id="mock-model-2", name="mock-model-2")
    models["providers"]["mock"]["models"].append(second)
    (home / "models.json").write_text(json.dumps(models))
    env = tempi_env(home, temporal_address)

    first = run_tempi(["--model", "mock/mock-model", "--mode", "json", "-p", "hi"], cwd=work, env=env)
    assert first.returncode == 0, first.stderr
    session_id = json.loads(first.stdout.splitlines()[0])["id"]
    short = session_id[:8]

    # The workflow still runs (idle) with local tools: asking for bwrap must not run unsandboxed.
    refused = run_tempi(["--session", short, "--sandbox", "bwrap", "-p", "touch it"], cwd=work, env=env)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "--sandbox local" in refused.stderr and f"tempi stop {short}" in refused.stderr
    assert len(scripted_server.requests_for(scenario)) == 1

    # The model can change on a running workflow, so --model is applied, not dropped.
    switched = run_tempi(
        ["--session", short, "--model", "mock/mock-model-2", "-p", "again"], cwd=work, env=env
    )
    assert switched.returncode == 0, switched.stderr
    assert switched.stdout == "two\n"
    requests = scripted_server.requests_for(scenario)
    assert [r.body["model"] for r in requests] == ["mock-model", "mock-model-2"]

    # Stopped, the session continues under the new flags: the tool runs in bwrap (or fails
    # where bwrap is missing), so nothing is written outside the workspace.
    stopped = run_tempi(["stop", short], cwd=work, env=env)
    assert stopped.returncode == 0, stopped.stderr
    resumed = run_tempi(["--session", short, "--sandbox", "bwrap", "-p", "touch it"], cwd=work, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "done\n"
    assert not outside.exists()
