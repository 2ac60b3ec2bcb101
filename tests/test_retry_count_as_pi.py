"""Retries counted as pi counts them: the provider SDK retries a failed request twice on
its own (pi-ai leaves the OpenAI and Anthropic SDKs at their default of 2), and settings'
`retry.maxRetries` counts the agent's retries of the whole call on top of that. So with
`maxRetries: 1` and three 500s in a row, pi sends a fourth request and succeeds."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.pi_bin import pi_bin

SETTINGS = {"retry": {"enabled": True, "maxRetries": 1, "baseDelayMs": 10}}


def _three_500s(server: ScriptedLLMServer, name: str) -> None:
    server.add_scenario(name, {"select": "sequential", "turns": [{"text": "Made it.", "fail_times": 3}]})


def test_pi_itself_succeeds_after_four_requests(tmp_path: Path, scripted_server: ScriptedLLMServer) -> None:
    pi = pi_bin()
    _three_500s(scripted_server, "retry-count-pi")
    pi_dir, work = tmp_path / "pi-agent", tmp_path / "work"
    work.mkdir()
    write_models_json(pi_dir, scripted_server, "retry-count-pi")
    (pi_dir / "settings.json").write_text(json.dumps(SETTINGS))
    env = tempi_env(tmp_path / "unused", None, PI_CODING_AGENT_DIR=str(pi_dir), PI_OFFLINE="1")
    proc = subprocess.run(
        [pi, "--no-session", "--model", "mock/mock-model", "-p", "Go"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "Made it."
    assert [r.status for r in scripted_server.requests_for("retry-count-pi")] == [500, 500, 500, 200]


def test_tempi_succeeds_after_four_requests_like_pi(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    _three_500s(scripted_server, "retry-count-tempi")
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_models_json(home, scripted_server, "retry-count-tempi")
    (home / "settings.json").write_text(json.dumps(SETTINGS))
    done = run_tempi(
        ["--no-session", "--model", "mock/mock-model", "-p", "Go"],
        cwd=work,
        env=tempi_env(home, temporal_address),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Made it."
    assert [r.status for r in scripted_server.requests_for("retry-count-tempi")] == [500, 500, 500, 200]
