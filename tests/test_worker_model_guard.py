"""A worker sends its owner's API key only to model endpoints its owner configured: a session
started by someone else, naming their own URL, is refused before any request leaves."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.worker import running_workers
from tests.conftest import write_models_json
from tests.session_harness import scripted_model, start_session, unique_queue

OWNER_KEY = "sk-owner-secret-987654321"


async def test_a_session_with_an_endpoint_the_owner_did_not_configure_is_refused(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scripted_server.add_scenario("guard-owner", [{"text": "owner model answered"}])
    scripted_server.add_scenario("guard-foreign", [{"text": "foreign endpoint answered"}])
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "guard-owner")
    monkeypatch.setenv("TEMPI_HOME", str(home))
    monkeypatch.setenv("MOCK_API_KEY", OWNER_KEY)
    queue = unique_queue()
    # The worker as `tempi worker` and the background service build it: default credentials.
    async with running_workers(
        temporal_client, task_queue=queue, sessions_root=tmp_path / "sessions", host_sandboxes=False
    ):
        foreign = scripted_model(scripted_server, "guard-foreign")
        s = await start_session(temporal_client, tmp_path / "foreign", foreign, task_queue=queue)
        await s.prompt("hello")
        events = await s.run_to_idle(timeout=60)
        final = [e for e in events if e["type"] == "message_end"][-1]["message"]
        assert final["stopReason"] == "error"
        assert foreign.base_url in final["errorMessage"]
        assert "refuses" in final["errorMessage"]
        assert scripted_server.requests_for("guard-foreign") == []
        assert not [e for e in events if e["type"] == "auto_retry_start"]

        # The owner's own model, from their models.json, still works with their key.
        owned = scripted_model(scripted_server, "guard-owner")
        s = await start_session(temporal_client, tmp_path / "owned", owned, task_queue=queue)
        await s.prompt("hello")
        events = await s.run_to_idle(timeout=60)
        final = [e for e in events if e["type"] == "message_end"][-1]["message"]
        assert final["content"][0]["text"] == "owner model answered"
        [request] = scripted_server.requests_for("guard-owner")
        assert OWNER_KEY in str(request.headers)
