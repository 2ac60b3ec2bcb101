"""`tempi -p` on Gemini and on Vertex AI (ADC), through the real CLI, worker, dev server and
the scripted server: a two-turn tool-calling conversation with thinking, and neither the key
nor the access token in the session file or the workflow history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.scripted_llm.gemini import thought_signature
from tests.conftest import run_tempi, tempi_env
from tests.history_payloads import payload_texts
from tests.test_llm_google import write_external_account

GEMINI_KEY = "AIza-e2e-gemini-secret-0123456789"
THOUGHT = "The user wants the greeting; bash can echo it."
TURNS = [
    {
        "thinking": THOUGHT,
        "tool_calls": [{"name": "bash", "arguments": {"command": "echo hello-from-bash"}}],
    },
    {"thinking": "It printed the greeting.", "text": "The command printed hello-from-bash."},
]


def _models_json(home: Path, provider: str, base_url: str, api: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    if provider == "google":
        # A provider of the user's own, its key named by an environment variable.
        config: dict[str, Any] = {
            "gem": {
                "baseUrl": base_url,
                "api": api,
                "apiKey": "E2E_GEMINI_KEY",
                "models": [{"id": "gemini-2.5-flash", "reasoning": True, "input": ["text", "image"]}],
            }
        }
    else:
        # pi's built-in provider, only pointed elsewhere.
        config = {"google-vertex": {"baseUrl": base_url}}
    (home / "models.json").write_text(json.dumps({"providers": config}))


@pytest.mark.parametrize("api", ["google-generative-ai", "google-vertex"])
async def test_tool_calling_session_on_google_keeps_secrets_out(
    tmp_path: Path,
    temporal_address: str,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    api: str,
) -> None:
    scenario = f"e2e-{api}"
    scripted_server.add_scenario(scenario, TURNS)
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    extra: dict[str, str] = {}
    if api == "google-generative-ai":
        _models_json(home, "google", scripted_server.url_for(scenario, api), api)
        model, secret = "gem/gemini-2.5-flash", GEMINI_KEY
        extra["E2E_GEMINI_KEY"] = GEMINI_KEY
    else:
        _models_json(home, "google-vertex", scripted_server.url_for(scenario, api), api)
        model = "google-vertex/gemini-2.5-flash"
        credentials = write_external_account(tmp_path / "adc.json", scripted_server.token_url_for(scenario))
        extra.update(
            GOOGLE_APPLICATION_CREDENTIALS=str(credentials),
            GOOGLE_CLOUD_PROJECT="e2e-project",
            GOOGLE_CLOUD_LOCATION="us-central1",
        )
        secret = ""  # the access token, known once issued
    env = {k: v for k, v in tempi_env(home, temporal_address, **extra).items() if not k.startswith("GEMINI_")}
    for name in ("GOOGLE_CLOUD_API_KEY", "GCLOUD_PROJECT"):
        env.pop(name, None)
    proc = run_tempi(
        ["--mode", "json", "--model", model, "--tools", "bash", "-p", "Echo the greeting with bash."],
        cwd=work,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    final = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert [b["text"] for b in final["content"] if b["type"] == "text"] == [
        "The command printed hello-from-bash."
    ]

    requests = scripted_server.requests_for(scenario)
    assert len(requests) == 2
    if api == "google-vertex":
        (secret,) = set(scripted_server.issued_tokens_for(scenario))
        assert {r.headers["authorization"] for r in requests} == {f"Bearer {secret}"}
    else:
        assert {r.headers["x-goog-api-key"] for r in requests} == {GEMINI_KEY}
    # The second turn carried the thought and the signed call back, and the command's output.
    model_turn, results = requests[1].body["contents"][1:3]
    assert model_turn["parts"][0] == {
        "thought": True,
        "text": THOUGHT,
        "thoughtSignature": thought_signature("thought:" + THOUGHT),
    }
    assert model_turn["parts"][1]["thoughtSignature"] == thought_signature(f"call:bash:{THOUGHT}")
    assert results["parts"][0]["functionResponse"]["response"]["output"].strip() == "hello-from-bash"

    session_file = next((home / "sessions").rglob("*.jsonl")).read_text()
    assert "hello-from-bash" in session_file
    assert secret not in session_file and secret not in proc.stdout + proc.stderr
    session_id = json.loads(session_file.splitlines()[0])["id"]
    histories = []
    async for execution in temporal_client.list_workflows():
        history = await temporal_client.get_workflow_handle(
            execution.id, run_id=execution.run_id
        ).fetch_history()
        exported = history.to_json()
        histories.append(exported + "\n".join(payload_texts(json.loads(exported))))
    searched = [h for h in histories if session_id in h]
    assert searched and any("hello-from-bash" in h for h in searched)  # the payloads really were searched
    assert all(secret not in h for h in histories)
