"""The embedded default: no TEMPORAL_ADDRESS, so `tempi` starts a shared background
service (dev server + worker) that outlives the terminal and stops itself when idle."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.service import read_info
from tests.conftest import run_tempi, tempi_env, write_models_json

# A slow end-to-end group: see tests/conftest.py.
pytestmark = pytest.mark.slow


def _wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_service_is_shared_survives_its_client_and_stops(
    tmp_path: Path, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "embedded",
        {
            "select": "sequential",
            "turns": [
                {"text": "first answer"},
                {"text": "slow " * 60, "chunk_size": 5, "chunk_delay_ms": 40},
            ],
        },
    )
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "embedded")
    env = tempi_env(home, None)
    try:
        first = run_tempi(["--model", "mock/mock-model", "-p", "hello"], cwd=tmp_path, env=env)
        assert first.returncode == 0, first.stderr
        assert first.stdout == "first answer\n"
        assert "starting the background Temporal server" in first.stderr
        info = read_info(home)
        assert info is not None
        status = run_tempi(["server", "status"], cwd=tmp_path, env=env)
        assert f"running at {info.address}" in status.stdout

        # A client killed mid-run does not stop its session: the service finishes it.
        client = subprocess.Popen(
            [sys.executable, "-m", "tempi", "--continue", "--mode", "json", "-p", "talk slowly"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert client.stdout is not None
        for line in client.stdout:
            if json.loads(line)["type"] == "message_update":
                break
        os.kill(client.pid, signal.SIGKILL)
        client.wait()
        session_file = next((home / "sessions").rglob("*.jsonl"))

        def finished() -> bool:
            texts = [
                json.loads(x).get("message", {}).get("content", [{}])
                for x in session_file.read_text().splitlines()
            ]
            return any(c and c[0].get("text", "").startswith("slow slow") for c in texts)

        _wait_for(finished, 60, "the session to finish without its client")
        assert read_info(home).pid == info.pid  # type: ignore[union-attr]  # the same shared service

        stop = run_tempi(["server", "stop"], cwd=tmp_path, env=env)
        assert "stopped" in stop.stdout
        assert read_info(home) is None
    finally:
        run_tempi(["server", "stop"], cwd=tmp_path, env=env)


def test_service_stops_itself_when_idle(tmp_path: Path, scripted_server: ScriptedLLMServer) -> None:
    home = tmp_path / "home"
    env = tempi_env(home, None, TEMPI_SERVER_IDLE_MINUTES="0.05")
    try:
        proc = run_tempi(["--model", "faux/demo", "-p", "look around"], cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "offline demo" in proc.stdout
        info = read_info(home)
        assert info is not None
        _wait_for(lambda: read_info(home) is None, 30, "the idle service to stop")
        _wait_for(lambda: not Path(f"/proc/{info.pid}").exists(), 15, "the service process to exit")
    finally:
        run_tempi(["server", "stop"], cwd=tmp_path, env=env)
