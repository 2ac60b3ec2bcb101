"""`tempi -p` on Amazon Bedrock: the built-in `amazon-bedrock` provider pointed at the scripted
server by models.json, AWS keys in the environment, pi's recorded tool-calling scenario.
The run must finish as pi's did, and neither the secret key nor a signature may reach the
session file or the workflow history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.scripted_llm.bedrock_auth import (
    SCRIPTED_AWS_ACCESS_KEY_ID,
    SCRIPTED_AWS_SECRET_ACCESS_KEY,
    parse_sigv4,
)
from tempi.workflows.session_types import workflow_id_for
from tests.conftest import run_tempi, tempi_env
from tests.fixture_paths import PI_FIXTURES
from tests.history_payloads import payload_texts

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
PROMPT = "Write notes.txt saying hello, then show it and list the directory."


def _messages(session_file: Path) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in session_file.read_text().splitlines() if line.strip()]
    return [entry["message"] for entry in entries if entry.get("type") == "message"]


async def test_a_tool_calling_session_on_bedrock_completes_without_leaking_credentials(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "bedrock-e2e"
    scripted_server.add_scenario(
        scenario, json.loads((PI_FIXTURES / "scenarios" / "bedrock-tools.json").read_text())
    )
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    home.mkdir()
    base_url = scripted_server.url_for(scenario, "bedrock-converse-stream")
    (home / "models.json").write_text(json.dumps({"providers": {"amazon-bedrock": {"baseUrl": base_url}}}))
    env = {k: v for k, v in tempi_env(home, temporal_address).items() if not k.startswith("AWS_")}
    env.update(
        AWS_ACCESS_KEY_ID=SCRIPTED_AWS_ACCESS_KEY_ID,
        AWS_SECRET_ACCESS_KEY=SCRIPTED_AWS_SECRET_ACCESS_KEY,
        AWS_SESSION_TOKEN="session-token-kept-out-of-history",
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    proc = run_tempi(
        ["--model", f"amazon-bedrock/{MODEL}", "--thinking", "medium", "-p", PROMPT],
        cwd=work,
        env=env,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "notes.txt says hello; it is the only file."
    assert (work / "notes.txt").read_text() == "hello\n"

    requests = scripted_server.requests_for(scenario)
    assert [r.status for r in requests] == [200, 200, 200]  # every signature verified
    signatures = [r.headers["authorization"] for r in requests]
    assert all((s := parse_sigv4(a)) is not None and s.region == "us-east-1" for a in signatures)
    assert requests[-1].headers["x-amz-security-token"] == "session-token-kept-out-of-history"

    # The session holds pi's messages: reasoning with its signature, the calls, pi's usage.
    (session_file,) = (home / "sessions").rglob("*.jsonl")
    ours = _messages(session_file)
    theirs = _messages(PI_FIXTURES / "sessions" / "bedrock-tools.jsonl")
    assert [m["role"] for m in ours] == [m["role"] for m in theirs]
    for mine, pis in zip(ours, theirs, strict=True):
        if mine["role"] == "assistant":
            assert [b["type"] for b in mine["content"]] == [b["type"] for b in pis["content"]]
            assert (mine["api"], mine["provider"], mine["model"]) == (
                pis["api"],
                pis["provider"],
                pis["model"],
            )
            mine_cost, pis_cost = mine["usage"].pop("cost"), pis["usage"].pop("cost")
            assert mine["usage"] == pis["usage"]
            assert mine_cost == pytest.approx(pis_cost)
            assert mine["stopReason"] == pis["stopReason"]
    assert ours[1]["content"][0]["thinkingSignature"] == theirs[1]["content"][0]["thinkingSignature"]

    session_text = session_file.read_text()
    session_id = json.loads(session_text.splitlines()[0])["id"]
    handle = temporal_client.get_workflow_handle(workflow_id_for(session_id))
    history = json.dumps(payload_texts((await handle.fetch_history()).to_json_dict()))
    assert "notes.txt says hello" in history
    secrets = [SCRIPTED_AWS_SECRET_ACCESS_KEY, "session-token-kept-out-of-history"]
    secrets += [a.rsplit("Signature=", 1)[1] for a in signatures]
    for secret in secrets:
        assert secret not in session_text
        assert secret not in history
