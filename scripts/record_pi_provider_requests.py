"""Record what pi 0.73.1 sends on three wire APIs, for tempi's request-shape tests.

Runs pi (`PI` below, or $PI_BIN) offline against tempi's scripted LLM server through a
two-turn tool-calling conversation (thinking + a `read` call, then an answer) on
azure-openai-responses, openai-codex-responses and mistral-conversations, and writes the
second request (the one replaying thinking, the call and its result) with pi's session
file into tests/fixtures/pi-0.73.1/. Re-run it after a pi upgrade:

    uv run python scripts/record_pi_provider_requests.py
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tempi.testing.scripted_llm import ScriptedLLMServer

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "pi-0.73.1"
PI = os.environ.get("PI_BIN", "/opt/pi-0.73.1/node_modules/.bin/pi")
PROMPT = "What does hello.txt say?"
MOCK_KEY = "mock-key"


def fake_codex_jwt(account_id: str) -> str:
    """An unsigned JWT carrying the ChatGPT account claim pi reads (never sent anywhere real)."""

    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    claims = {"https://api.openai.com/auth": {"chatgpt_account_id": account_id}, "exp": 4102444800}
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


@dataclass
class Recording:
    name: str  # fixture file stem
    api: str
    model: str  # pi's --model
    thinking: str
    call_id: str
    env: dict[str, str] = field(default_factory=dict)
    models_json: dict[str, object] | None = None
    auth_json: dict[str, object] | None = None


def recordings(server: ScriptedLLMServer) -> list[Recording]:
    def provider_base(provider: str, name: str, api: str) -> dict[str, object]:
        return {"providers": {provider: {"baseUrl": server.url_for(name, api)}}}

    return [
        Recording(
            name="azure-openai-responses",
            api="azure-openai-responses",
            model="azure-openai-responses/gpt-5.4",
            thinking="medium",
            call_id="call_read_1",
            env={
                "AZURE_OPENAI_API_KEY": MOCK_KEY,
                "AZURE_OPENAI_BASE_URL": server.url_for("azure-openai-responses", "azure-openai-responses"),
                "AZURE_OPENAI_DEPLOYMENT_NAME_MAP": "gpt-5.4=tempi-deployment,other=x",
            },
        ),
        Recording(
            name="openai-codex-responses",
            api="openai-codex-responses",
            model="openai-codex/gpt-5.5",
            thinking="medium",
            call_id="call_read_1",
            models_json=provider_base("openai-codex", "openai-codex-responses", "openai-codex-responses"),
            auth_json={
                "openai-codex": {
                    "type": "oauth",
                    "access": fake_codex_jwt("acc-1234"),
                    "refresh": "r",
                    "expires": 4102444800000,
                    "accountId": "acc-1234",
                }
            },
        ),
        Recording(
            name="mistral-conversations",
            api="mistral-conversations",
            model="mistral/magistral-medium-latest",
            thinking="medium",
            call_id="ReadFile1",
            env={"MISTRAL_API_KEY": MOCK_KEY},
            models_json=provider_base("mistral", "mistral-conversations", "mistral-conversations"),
        ),
        Recording(
            name="mistral-conversations-effort",
            api="mistral-conversations",
            model="mistral/mistral-small-latest",
            thinking="high",
            call_id="ReadFile1",
            env={"MISTRAL_API_KEY": MOCK_KEY},
            models_json=provider_base("mistral", "mistral-conversations-effort", "mistral-conversations"),
        ),
    ]


def record(server: ScriptedLLMServer, rec: Recording, scratch: Path) -> None:
    server.add_scenario(
        rec.name,
        [
            {
                "thinking": "The user wants hello.txt; read it.",
                "tool_calls": [{"id": rec.call_id, "name": "read", "arguments": {"path": "hello.txt"}}],
            },
            {"text": "hello.txt says hi."},
        ],
    )
    home = scratch / rec.name
    agent, work, sessions = home / ".pi" / "agent", home / "project", home / "sessions"
    for folder in (agent, work, sessions):
        folder.mkdir(parents=True)
    (work / "hello.txt").write_text("hi\n")
    if rec.models_json is not None:
        (agent / "models.json").write_text(json.dumps(rec.models_json))
    if rec.auth_json is not None:
        (agent / "auth.json").write_text(json.dumps(rec.auth_json))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "PI_CODING_AGENT_DIR": str(agent),
        "PI_OFFLINE": "1",
        **rec.env,
    }
    command = [PI, "--model", rec.model, "--thinking", rec.thinking, "--session-dir", str(sessions)]
    proc = subprocess.run(
        [*command, "-p", PROMPT], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    requests = server.requests_for(rec.name)
    if proc.returncode != 0 or len(requests) != 2:
        sys.exit(f"{rec.name}: pi exited {proc.returncode} after {len(requests)} requests:\n{proc.stderr}")
    last = requests[-1]
    fixture = {"path": last.path, "query": last.query, "headers": last.headers, "body": last.body}
    (FIXTURES / "llm-requests" / f"{rec.name}.json").write_text(json.dumps(fixture, indent=1) + "\n")
    (session_file,) = sessions.rglob("*.jsonl")
    (FIXTURES / "sessions" / f"{rec.name}.jsonl").write_text(session_file.read_text())
    print(f"{rec.name}: {last.path} -> {proc.stdout.strip()!r}")


def main() -> None:
    server = ScriptedLLMServer()
    server.start_in_thread()
    try:
        with tempfile.TemporaryDirectory(prefix="pi-record-") as scratch:
            for rec in recordings(server):
                record(server, rec, Path(scratch))
    finally:
        server.stop_thread()


if __name__ == "__main__":
    main()
