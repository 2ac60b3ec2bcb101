"""On a shared Temporal server a user's `tempi` is a client, not a worker: its sessions' model
calls and commands run on the team's workers, it runs nobody else's, it says at once when no
worker serves the queue, and another tool's default temporal.toml profile does not take it
to the company cluster unasked."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.dev_server import free_port, start_dev_server
from tempi.workers.temporal_connection import load_settings
from tests.conftest import start_tempi_worker, tempi_env, write_models_json


def _wait_for_text(path: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in (path.read_text() if path.exists() else ""):
        assert proc.poll() is None, f"exited ({proc.returncode}): {path.read_text()}"
        assert time.monotonic() < deadline, path.read_text()
        time.sleep(0.05)


def test_a_client_runs_no_worker_and_its_command_runs_on_the_teams_worker(
    tmp_path: Path, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "tenancy"
    scripted_server.add_scenario(
        scenario,
        [
            {"tool_calls": [{"id": "who", "name": "bash", "arguments": {"command": "echo ran-by-$WHO"}}]},
            {"text": "Done."},
        ],
    )
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_models_json(home, scripted_server, scenario)
    port = free_port()
    # A server of its own: on the suite's shared one, other tests' clients poll the queue.
    server = start_dev_server(tmp_path / "temporal.db", port, log_path=tmp_path / "server.log")
    address = f"127.0.0.1:{port}"
    client_env = tempi_env(home, address, WHO="client", TEMPI_TOOL_ENV="WHO")
    del client_env["TEMPI_CLIENT_WORKER"]
    client_err = tmp_path / "client.err"
    worker = None
    with client_err.open("wb") as err:
        client = subprocess.Popen(
            [sys.executable, "-m", "tempi", "--model", "mock/mock-model", "-p", "Who runs this?"],
            cwd=work, env=client_env, stdout=subprocess.PIPE, stderr=err,
        )  # fmt: skip
    try:
        _wait_for_text(client_err, "no worker polls task queue", client)
        worker = start_tempi_worker(
            home, address, "tempi", tmp_path / "worker.log", WHO="worker", TEMPI_TOOL_ENV="WHO"
        )
        out, _ = client.communicate(timeout=120)
    finally:
        for proc in (client, worker):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        server.terminate()
        server.wait(30)
    said = client_err.read_text()
    assert client.returncode == 0, said
    assert out.decode() == "Done.\n"
    assert f"tempi: on the Temporal server at {address} (TEMPORAL_ADDRESS)" in said
    session = next((home / "sessions").rglob("*.jsonl"))
    results = [
        json.loads(line)["message"]
        for line in session.read_text().splitlines()
        if '"role":"toolResult"' in line.replace(" ", "")
    ]
    assert [r["content"][0]["text"].strip() for r in results] == ["ran-by-worker"]


def test_a_default_temporal_toml_profile_is_not_followed_unless_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "temporalio").mkdir()
    (tmp_path / "temporalio" / "temporal.toml").write_text(
        '[profile.default]\naddress = "cluster.example:7233"\n'
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # where the SDK looks for the file

    unchosen = load_settings({})
    assert unchosen.address is None and unchosen.unchosen_profile_address == "cluster.example:7233"
    chosen = load_settings({"TEMPORAL_PROFILE": "default"})
    assert chosen.address == "cluster.example:7233" and chosen.unchosen_profile_address is None
    assert load_settings({"TEMPORAL_ADDRESS": "other:7233"}).address == "other:7233"
