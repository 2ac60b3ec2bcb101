"""`tempi -p` on a models.json provider of each of azure-openai-responses, openai-codex-responses
and mistral-conversations: a tool call with thinking, then the answer, through the real CLI,
worker and dev server; the key reaches the server and neither the session file nor the
workflow's history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows.session_types import workflow_id_for
from tests.conftest import run_tempi, tempi_env
from tests.history_payloads import payload_texts
from tests.test_azure_codex_mistral_requests import FAKE_JWT

MOCK_KEY = "sk-mock-secret-key-12345"  # what tempi_env puts in MOCK_API_KEY


@pytest.mark.parametrize(
    ("api", "key"),
    [
        ("mistral-conversations", MOCK_KEY),
        pytest.param("azure-openai-responses", MOCK_KEY, marks=pytest.mark.slow),
        pytest.param("openai-codex-responses", FAKE_JWT, marks=pytest.mark.slow),
    ],
)
async def test_tempi_p_runs_a_tool_call_and_keeps_the_key_out_of_history(
    api: str,
    key: str,
    tmp_path: Path,
    temporal_address: str,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
) -> None:
    scenario = f"e2e-{api}"
    scripted_server.add_scenario(
        scenario,
        [
            {
                "thinking": "Look at the file.",
                "tool_calls": [{"name": "read", "arguments": {"path": "hello.txt"}}],
            },
            {"text": "hello.txt says hi."},
        ],
    )
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    home.mkdir()
    (work / "hello.txt").write_text("hi\n")
    model = {"id": "m1", "name": "m1", "reasoning": True, "input": ["text"], "maxTokens": 16384}
    provider = {"baseUrl": scripted_server.url_for(scenario, api), "api": api, "apiKey": "MOCK_API_KEY"}
    (home / "models.json").write_text(json.dumps({"providers": {"mine": {**provider, "models": [model]}}}))

    proc = run_tempi(
        ["--model", "mine/m1", "--thinking", "high", "-p", "What does hello.txt say?"],
        cwd=work,
        env=tempi_env(home, temporal_address, MOCK_API_KEY=key),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello.txt says hi.\n"

    first, second = scripted_server.requests_for(scenario)
    assert key in json.dumps(first.headers)
    assert "hi\\n" in json.dumps(second.body) or '"hi"' in json.dumps(second.body)

    (session_file,) = (home / "sessions").rglob("*.jsonl")
    session = session_file.read_text()
    assert "Look at the file." in session and key not in session
    session_id = json.loads(session.splitlines()[0])["id"]
    history = await temporal_client.get_workflow_handle(workflow_id_for(session_id)).fetch_history()
    text = json.dumps(payload_texts(history.to_json_dict()))
    assert "Look at the file." in text and "hello.txt" in text
    assert key not in text
