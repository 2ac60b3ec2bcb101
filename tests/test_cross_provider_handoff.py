"""One session handed from Anthropic to Gemini to Amazon Bedrock, as pi's cross-provider
handoff allows: each model gets the whole conversation in its own wire format (the other
providers' tool calls and results, their thinking as pi transforms it) and the session goes
on with tool calls, through the real CLI, worker and scripted server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.scripted_llm.bedrock_auth import SCRIPTED_AWS_ACCESS_KEY_ID, SCRIPTED_AWS_SECRET_ACCESS_KEY
from tests.conftest import run_tempi, tempi_env

BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def _turns(word: str, thinking: str) -> dict[str, Any]:
    return {
        "select": "sequential",
        "turns": [
            {
                "thinking": thinking,
                "tool_calls": [{"name": "bash", "arguments": {"command": f"echo {word}-ran"}}],
            },
            {"text": f"{word} done."},
        ],
    }


def test_a_session_moves_from_anthropic_to_gemini_to_bedrock_with_its_tools_and_thinking(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    for name, word in (("hand-a", "one"), ("hand-g", "two"), ("hand-b", "three")):
        scripted_server.add_scenario(name, _turns(word, f"Thinking about step {word}."))
    home, work = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    work.mkdir()
    providers = {
        "anthropic": {"baseUrl": scripted_server.url_for("hand-a", "anthropic-messages")},
        "google": {"baseUrl": scripted_server.url_for("hand-g", "google-generative-ai")},
        "amazon-bedrock": {"baseUrl": scripted_server.url_for("hand-b", "bedrock-converse-stream")},
    }
    (home / "models.json").write_text(json.dumps({"providers": providers}))
    env = {k: v for k, v in tempi_env(home, temporal_address).items() if not k.startswith("AWS_")}
    env.update(
        ANTHROPIC_API_KEY="sk-ant-handoff-key",
        GEMINI_API_KEY="AIza-handoff-key",
        AWS_ACCESS_KEY_ID=SCRIPTED_AWS_ACCESS_KEY_ID,
        AWS_SECRET_ACCESS_KEY=SCRIPTED_AWS_SECRET_ACCESS_KEY,
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )

    steps = [
        ["--model", "anthropic/claude-sonnet-4-5", "--thinking", "medium", "-p", "Step one."],
        ["-c", "--model", "google/gemini-2.5-flash", "--thinking", "medium", "-p", "Step two."],
        ["-c", "--model", f"amazon-bedrock/{BEDROCK_MODEL}", "--thinking", "medium", "-p", "Step three."],
    ]
    for argv, word in zip(steps, ("one", "two", "three"), strict=True):
        proc = run_tempi(argv, cwd=work, env=env, timeout=180)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == f"{word} done."

    # Gemini saw Anthropic's turn: the call as a functionCall, its output as a functionResponse.
    gemini_first = json.dumps(scripted_server.requests_for("hand-g")[0].body)
    assert "Step one." in gemini_first and "echo one-ran" in gemini_first and "one-ran" in gemini_first
    assert '"functionCall"' in gemini_first and '"functionResponse"' in gemini_first
    # Bedrock saw both earlier providers' calls and results as toolUse/toolResult blocks.
    bedrock_first = scripted_server.requests_for("hand-b")[0].body
    sent = json.dumps(bedrock_first)
    for text in ("Step one.", "echo one-ran", "Step two.", "echo two-ran", "one done.", "two done."):
        assert text in sent, text
    uses = [b["toolUse"] for m in bedrock_first["messages"] for b in m["content"] if "toolUse" in b]
    results = [b["toolResult"] for m in bedrock_first["messages"] for b in m["content"] if "toolResult" in b]
    assert len(uses) == len(results) == 2
    assert [u["toolUseId"] for u in uses] == [r["toolUseId"] for r in results]
    assert all(r["status"] == "success" for r in results)

    # One file, one chain, three providers' answers in it.
    session = next((home / "sessions").rglob("*.jsonl"))
    entries = [json.loads(line) for line in session.read_text().splitlines()]
    answers = [
        (e["message"]["provider"], e["message"]["stopReason"])
        for e in entries
        if e.get("type") == "message" and e["message"]["role"] == "assistant"
    ]
    assert answers == [
        ("anthropic", "toolUse"),
        ("anthropic", "stop"),
        ("google", "toolUse"),
        ("google", "stop"),
        ("amazon-bedrock", "toolUse"),
        ("amazon-bedrock", "stop"),
    ]
    ids = [e["id"] for e in entries[1:]]
    assert all(e["parentId"] == prev for e, prev in zip(entries[2:], ids, strict=False))
