"""Retries counted as pi counts them: the provider SDK retries a failed request twice on
its own (pi-ai leaves the OpenAI and Anthropic SDKs at their default, unless settings'
`retry.provider.maxRetries` says otherwise), and `retry.maxRetries` counts the agent's
retries of the whole call on top of that. So with `maxRetries: 1` and three 500s in a row,
pi sends a fourth request and succeeds."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.pi_bin import pi_bin

RETRY = {"enabled": True, "maxRetries": 1, "baseDelayMs": 10}
CASES = [
    pytest.param({"retry": RETRY}, [500, 500, 500, 200], id="sdk-default"),
    # No agent retries, but three of the SDK's own.
    pytest.param(
        {"retry": {**RETRY, "maxRetries": 0, "provider": {"maxRetries": 3}}},
        [500, 500, 500, 200],
        id="sdk-only",
    ),
]


def _three_500s(server: ScriptedLLMServer, name: str) -> None:
    server.add_scenario(name, {"select": "sequential", "turns": [{"text": "Made it.", "fail_times": 3}]})


def _assert_made_it(code: int, stdout: str, stderr: str) -> None:
    assert code == 0, stderr
    assert stdout.strip() == "Made it."


@pytest.mark.parametrize(("settings", "statuses"), CASES)
def test_pi_itself(
    tmp_path: Path, scripted_server: ScriptedLLMServer, settings: dict[str, Any], statuses: list[int]
) -> None:
    pi = pi_bin()
    scenario = f"retry-count-pi-{settings['retry']['maxRetries']}"
    _three_500s(scripted_server, scenario)
    pi_dir, work = tmp_path / "pi-agent", tmp_path / "work"
    work.mkdir()
    write_models_json(pi_dir, scripted_server, scenario)
    (pi_dir / "settings.json").write_text(json.dumps(settings))
    env = tempi_env(tmp_path / "unused", None, PI_CODING_AGENT_DIR=str(pi_dir), PI_OFFLINE="1")
    proc = subprocess.run(
        [pi, "--no-session", "--model", "mock/mock-model", "-p", "Go"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert [r.status for r in scripted_server.requests_for(scenario)] == statuses
    _assert_made_it(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.slow
@pytest.mark.parametrize(("settings", "statuses"), CASES)
def test_tempi_sends_the_requests_pi_sends(
    tmp_path: Path,
    temporal_address: str,
    scripted_server: ScriptedLLMServer,
    settings: dict[str, Any],
    statuses: list[int],
) -> None:
    scenario = f"retry-count-tempi-{settings['retry']['maxRetries']}"
    _three_500s(scripted_server, scenario)
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_models_json(home, scripted_server, scenario)
    (home / "settings.json").write_text(json.dumps(settings))
    done = run_tempi(
        ["--no-session", "--model", "mock/mock-model", "-p", "Go"],
        cwd=work,
        env=tempi_env(home, temporal_address),
    )
    assert [r.status for r in scripted_server.requests_for(scenario)] == statuses
    _assert_made_it(done.returncode, done.stdout, done.stderr)
