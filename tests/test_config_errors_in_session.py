"""A configuration error met during a session (models.json broken between two prompts)
ends that turn at once with an error naming the file, and the session takes the next
prompt once the file is fixed."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.credentials import Credentials
from tempi.workers.worker import running_workers
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.session_harness import Session, scripted_model, start_session, unique_queue

SCENARIO = "config-error-mid-session"


async def _prompt_and_wait(session: Session, text: str, timeout: float) -> dict:
    """The last assistant message of the run the prompt starts."""
    await session.prompt(text, timeout=timeout)
    events = await asyncio.wait_for(session.run_to_idle(timeout=timeout), timeout)
    ends = [
        e["message"] for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant"
    ]
    assert ends, f"no assistant message; events: {[e['type'] for e in events]}"
    return ends[-1]


async def test_broken_models_json_fails_the_turn_at_once_and_the_next_prompt_works(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scripted_server.add_scenario(
        SCENARIO, {"select": "sequential", "turns": [{"text": "first answer"}, {"text": "third answer"}]}
    )
    home = tmp_path / "home"
    write_models_json(home, scripted_server, SCENARIO)
    models_json = home / "models.json"
    good = models_json.read_text()
    monkeypatch.setenv("MOCK_API_KEY", "sk-mock-secret-key-12345")
    queue = unique_queue()
    async with running_workers(
        temporal_client,
        task_queue=queue,
        sessions_root=tmp_path / "sessions",
        credentials=Credentials(models_json),
    ):
        session = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, SCENARIO), task_queue=queue
        )
        first = await _prompt_and_wait(session, "one", timeout=30)
        assert first["stopReason"] == "stop"

        # A half-finished edit: the file no longer parses.
        models_json.write_text(good[: len(good) // 2])
        started = time.monotonic()
        second = await _prompt_and_wait(session, "two", timeout=20)
        elapsed = time.monotonic() - started
        assert second["stopReason"] == "error"
        assert str(models_json) in second["errorMessage"]
        assert "not valid JSON" in second["errorMessage"]
        assert "sk-mock-secret-key-12345" not in second["errorMessage"]
        assert elapsed < 10, f"the configuration error took {elapsed:.1f} s to reach the user"

        models_json.write_text(good)
        third = await _prompt_and_wait(session, "three", timeout=30)
        assert third["stopReason"] == "stop"
        assert third["content"][0]["text"] == "third answer"


def test_failing_api_key_command_ends_print_mode_at_once(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    """`tempi -p` whose models.json gets the key from a command that fails: the user sees
    why within seconds instead of a silent wait while the call is retried."""
    scripted_server.add_scenario("config-error-key-command", [{"text": "never reached"}])
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "config-error-key-command")
    models_json = home / "models.json"
    config = json.loads(models_json.read_text())
    config["providers"]["mock"]["apiKey"] = "!echo the vault is locked >&2; exit 3"
    models_json.write_text(json.dumps(config))
    started = time.monotonic()
    proc = run_tempi(
        ["--model", "mock/mock-model", "-p", "hello"],
        cwd=tmp_path,
        env=tempi_env(home, temporal_address),
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode != 0
    # The command's own output never travels (issue 42): it may quote the secret.
    assert "the vault is locked" not in proc.stderr + proc.stdout
    assert "the apiKey command `echo` in models.json exited with status 3" in proc.stderr
    assert "Fix the configuration" in proc.stderr + proc.stdout
    assert elapsed < 30, f"took {elapsed:.1f} s"
