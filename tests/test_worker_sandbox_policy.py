"""Sandboxing is the operator's choice on a shared worker: TEMPI_ALLOWED_SANDBOXES refuses
sessions (before the model is paid), tool calls and the user's `!cmd` in any other sandbox,
each with a message naming the setting; the sandboxes it allows still work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.worker import running_workers
from tests.conftest import write_models_json
from tests.session_harness import scripted_model, start_session, unique_queue


async def test_a_worker_refuses_sessions_and_commands_in_a_sandbox_its_operator_does_not_allow(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scripted_server.add_scenario("policy-local", [{"text": "should not be asked"}])
    scripted_server.add_scenario(
        "policy-bwrap",
        [
            {"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "echo inside"}}]},
            {"text": "done"},
        ],
    )
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "policy-local")
    monkeypatch.setenv("TEMPI_HOME", str(home))
    monkeypatch.setenv("MOCK_API_KEY", "sk-mock")
    monkeypatch.setenv("TEMPI_ALLOWED_SANDBOXES", "bwrap,docker")
    # The owner's models.json names the bwrap scenario's endpoint too.
    models = json.loads((home / "models.json").read_text())
    models["providers"]["mock-bwrap"] = {
        **models["providers"]["mock"],
        "baseUrl": scripted_server.url_for("policy-bwrap", "openai-completions"),
    }
    (home / "models.json").write_text(json.dumps(models))
    queue = unique_queue()
    async with running_workers(
        temporal_client, task_queue=queue, sessions_root=tmp_path / "sessions", host_sandboxes=False
    ):
        # A session asking for the local sandbox (the default) ends its first turn at once.
        local = await start_session(
            temporal_client,
            tmp_path / "local",
            scripted_model(scripted_server, "policy-local"),
            task_queue=queue,
        )
        await local.prompt("cat /proc/1/environ")
        events = await local.run_to_idle(timeout=60)
        final = [e for e in events if e["type"] == "message_end"][-1]["message"]
        assert final["stopReason"] == "error"
        assert "TEMPI_ALLOWED_SANDBOXES" in final["errorMessage"], final["errorMessage"]
        assert "'local'" in final["errorMessage"] and "bwrap, docker" in final["errorMessage"]
        assert scripted_server.requests_for("policy-local") == []
        # The user's own `!cmd` is refused the same way, and never runs.
        marker = tmp_path / "local" / "work" / "ran"
        result = await local.session.bash(f"touch {marker}")
        assert "TEMPI_ALLOWED_SANDBOXES" in result.output, result.output
        assert not marker.exists()

        # A sandbox the operator allows runs as before.
        model = scripted_model(scripted_server, "policy-bwrap").model_copy(update={"provider": "mock-bwrap"})
        boxed = await start_session(
            temporal_client, tmp_path / "bwrap", model, task_queue=queue, sandbox="bwrap"
        )
        await boxed.prompt("say inside")
        await boxed.run_to_idle(timeout=60)
        requests = scripted_server.requests_for("policy-bwrap")
        assert len(requests) == 2
        assert "inside" in json.dumps(requests[1].body["messages"][-1])


def test_an_unknown_sandbox_in_the_policy_stops_the_worker_at_start(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import tempi_env

    done = subprocess.run(
        [sys.executable, "-m", "tempi", "worker"],
        env=tempi_env(tmp_path / "home", "127.0.0.1:1", TEMPI_ALLOWED_SANDBOXES="bwrap,podman"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert "TEMPI_ALLOWED_SANDBOXES" in done.stderr and "podman" in done.stderr
