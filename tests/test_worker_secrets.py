"""A command a session runs on a shared worker cannot read the worker's secrets: model keys
may come from files (`NAME_FILE`), keys given as variables leave the worker's environment at
start, and the worker's /proc files (environ, mem) are closed to processes of its user."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from temporalio.client import Client

from tempi.config.errors import ConfigError
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import start_tempi_worker, write_models_json
from tests.session_harness import scripted_model, start_session, unique_queue

FILE_KEY = "sk-from-a-mounted-file-5150"
ENV_KEY = "sk-ant-given-as-variable-8086"


async def test_a_local_command_reads_no_secret_of_its_worker(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "secrets"
    log = tmp_path / "worker.log"
    queue = unique_queue()
    home = tmp_path / "home"
    write_models_json(home, scripted_server, scenario)
    # A Kubernetes Secret mounted as a directory of files, one per variable.
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "MOCK_API_KEY").write_text(FILE_KEY + "\n")
    worker = start_tempi_worker(
        home,
        temporal_address,
        queue,
        log,
        MOCK_API_KEY="",
        TEMPI_SECRETS_DIR=str(secrets),
        ANTHROPIC_API_KEY=ENV_KEY,
    )
    try:
        command = (
            f"cat /proc/$PPID/environ; cat /proc/{worker.pid}/environ; "
            f"tr '\\0' '\\n' < /proc/self/environ; echo checked"
        )
        scripted_server.add_scenario(
            scenario,
            [
                {"tool_calls": [{"id": "peek", "name": "bash", "arguments": {"command": command}}]},
                {"text": "Nothing found."},
            ],
        )
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, scenario), task_queue=queue
        )
        await s.prompt("Find the keys.", timeout=120)
        await s.run_to_idle(timeout=120)
        # The worker's own view of itself is unchanged: the model was called with the key
        # from the file.
        first, second = scripted_server.requests_for(scenario)
        assert FILE_KEY in str(first.headers)
        result = json.dumps(second.body["messages"][-1])
        assert "checked" in result, result
        assert FILE_KEY not in result and ENV_KEY not in result, result
        if os.geteuid() != 0:
            # Root may read any process's /proc files; the values it finds there are blanked.
            assert "Permission denied" in result, result
        # Nor can anything else of the worker's user read them.
        environ = Path(f"/proc/{worker.pid}/environ")
        try:
            seen = environ.read_bytes()
        except PermissionError:
            seen = b""
        assert ENV_KEY.encode() not in seen
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)


def test_an_unreadable_secret_file_stops_the_worker_at_start(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    worker = start_tempi_worker(
        tmp_path / "home",
        "127.0.0.1:1",
        unique_queue(),
        log,
        ANTHROPIC_API_KEY_FILE=str(tmp_path / "missing"),
    )
    deadline = time.monotonic() + 60
    while worker.poll() is None:
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    said = log.read_text()
    assert worker.returncode == 3, said
    assert f"ANTHROPIC_API_KEY_FILE names {tmp_path / 'missing'}" in said


def test_secrets_come_from_the_files_their_variables_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tempi.config.env_api_keys import env_api_key
    from tempi.workers.codec import load_key_ring

    (tmp_path / "anthropic").write_text(ENV_KEY + "\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY_FILE", str(tmp_path / "anthropic"))
    assert env_api_key("anthropic") == ENV_KEY
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "OPENAI_API_KEY").write_text("sk-openai-in-dir\n")
    (tmp_path / "dir" / "TEMPI_CODEC_KEYS").write_text("k1:" + "A" * 43 + "=\n")
    monkeypatch.setenv("TEMPI_SECRETS_DIR", str(tmp_path / "dir"))
    assert env_api_key("openai") == "sk-openai-in-dir"
    ring = load_key_ring()
    assert ring is not None and ring.ids == ["k1"]
    # A file that is named but cannot be read is an error naming the variable, not "no key".
    monkeypatch.setenv("ANTHROPIC_API_KEY_FILE", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY_FILE names"):
        env_api_key("anthropic")
