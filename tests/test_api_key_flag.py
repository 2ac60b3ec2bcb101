"""--api-key when another process also runs a worker (issue 19 item 14): the key lives only
in this process, so it must either reach every model request or be refused, never ignored."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json

pytestmark = pytest.mark.slow

NEW_KEY = "sk-from-the-flag-0000"


def _authorization(headers: dict[str, str]) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == "authorization"), None)


def test_api_key_is_refused_when_another_worker_would_run_the_model_calls(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    scenario = "api-key-other-worker"
    scripted_server.add_scenario(scenario, [{"text": f"answer {n}"} for n in range(8)])
    write_models_json(home, scripted_server, scenario)
    env = tempi_env(home, temporal_address)
    worker = subprocess.Popen(
        [sys.executable, "-m", "tempi", "worker"],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stderr is not None
        deadline = time.monotonic() + 60
        while "polling" not in worker.stderr.readline():
            assert worker.poll() is None and time.monotonic() < deadline, "tempi worker did not start"
        prompts = [f"question {n}" for n in range(8)]
        proc = run_tempi(
            ["--model", "mock/mock-model", "--api-key", NEW_KEY, "--no-session", "-p", *prompts],
            cwd=work,
            env=env,
        )
    finally:
        worker.terminate()
        worker.wait(30)
    requests = scripted_server.requests_for(scenario)
    keys = [_authorization(r.headers) for r in requests]
    if proc.returncode == 0:
        # Accepted: then every model request must carry the flag's key.
        assert keys and all(k == f"Bearer {NEW_KEY}" for k in keys), json.dumps(keys)
    else:
        assert "--api-key" in proc.stderr and "other workers" in proc.stderr, proc.stderr
        assert requests == []


def test_api_key_is_refused_when_models_json_names_a_literal_key(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    scenario = "api-key-literal"
    scripted_server.add_scenario(scenario, [{"text": "hello"}])
    write_models_json(home, scripted_server, scenario, provider="openai")
    models = json.loads((home / "models.json").read_text())
    models["providers"]["openai"]["apiKey"] = "sk-literal-in-models-json"
    (home / "models.json").write_text(json.dumps(models))
    proc = run_tempi(
        ["--model", "openai/mock-model", "--api-key", NEW_KEY, "--no-session", "-p", "hi"],
        cwd=work,
        env=tempi_env(home, temporal_address),
    )
    requests = scripted_server.requests_for(scenario)
    if proc.returncode == 0:
        assert [_authorization(r.headers) for r in requests] == [f"Bearer {NEW_KEY}"]
    else:
        assert "--api-key" in proc.stderr and "apiKey" in proc.stderr, proc.stderr
        assert requests == []
