"""Record what pi 0.73.1 sends on Google's two wire APIs, for tempi's request-shape tests.

    uv run python scripts/record_pi_gemini.py [--pi PATH]

pi runs offline against the scripted LLM server (its built-in `google` and `google-vertex`
providers pointed there by a models.json base URL) through a two-turn tool-calling
conversation with thinking: the first turn thinks, says something and calls `read` twice
(one call fails), the second answers. For each case the last request pi sent (the one that
replays thoughts, signatures, function calls and both kinds of function response) is written
to tests/fixtures/pi-0.73.1/llm-requests/<case>.json, and pi's session file to
tests/fixtures/pi-0.73.1/sessions/<case>.jsonl, so a test can rebuild the same conversation.
Vertex is recorded three ways: API key, ADC (an external_account credentials file whose
token_url is the server's token endpoint); the Gemini API once more with thinking off.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tempi.testing.scripted_llm import ScriptedLLMServer

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "pi-0.73.1"
PROMPT = "Read notes.txt and missing.txt, then tell me what the notes say."
GEMINI_KEY = "gemini-mock-key"
VERTEX_KEY = "vertex-mock-key"
SUBJECT_TOKEN = "scripted-subject-token"
# Headers whose values say nothing about the request (the SDK's version, node's fetch).
VOLATILE_HEADERS = {
    "user-agent",
    "x-goog-api-client",
    "accept-encoding",
    "connection",
    "host",
    "content-length",
}

TURNS: list[dict[str, Any]] = [
    {
        "thinking": "The user wants two files read. I will read both at once.",
        "text": "Reading both files.",
        "tool_calls": [
            {"name": "read", "arguments": {"path": "notes.txt"}},
            {"name": "read", "arguments": {"path": "missing.txt"}},
        ],
        "usage": {"input": 1200, "output": 40, "cacheRead": 300},
    },
    {
        "thinking": "notes.txt says hello; missing.txt does not exist.",
        "text": "The notes say: hello from the notes. missing.txt does not exist.",
        "usage": {"input": 1500, "output": 30},
    },
]


@dataclass
class Case:
    name: str
    provider: str
    api: str
    model: str
    thinking: str = "medium"
    env: dict[str, str] = field(default_factory=dict)
    adc: bool = False


CASES = [
    Case(
        "google-generative-ai",
        "google",
        "google-generative-ai",
        "gemini-2.5-flash",
        env={"GEMINI_API_KEY": GEMINI_KEY},
    ),
    Case(
        "google-vertex-api-key",
        "google-vertex",
        "google-vertex",
        "gemini-3.1-pro-preview",
        env={"GOOGLE_CLOUD_API_KEY": VERTEX_KEY},
    ),
    Case(
        "google-vertex-adc",
        "google-vertex",
        "google-vertex",
        "gemini-2.5-pro",
        env={"GOOGLE_CLOUD_PROJECT": "scripted-project", "GOOGLE_CLOUD_LOCATION": "us-central1"},
        adc=True,
    ),
    Case(
        "google-thinking-off",
        "google",
        "google-generative-ai",
        "gemini-2.5-flash",
        thinking="off",
        env={"GEMINI_API_KEY": GEMINI_KEY},
    ),
]


def _write_adc_file(home: Path, server: ScriptedLLMServer, scenario: str) -> Path:
    subject = home / "subject-token"
    subject.write_text(SUBJECT_TOKEN)
    credentials = home / "adc.json"
    credentials.write_text(
        json.dumps(
            {
                "type": "external_account",
                "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q",
                "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                "token_url": server.token_url_for(scenario),
                "credential_source": {"file": str(subject)},
            }
        )
    )
    return credentials


def record(case: Case, server: ScriptedLLMServer, pi: str) -> None:
    scenario = f"record-{case.name}"
    server.add_scenario(scenario, TURNS)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        agent, work = root / "agent", root / "work"
        agent.mkdir()
        work.mkdir()
        (work / "notes.txt").write_text("hello from the notes\n")
        models = {"providers": {case.provider: {"baseUrl": server.url_for(scenario, case.api)}}}
        (agent / "models.json").write_text(json.dumps(models))
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("GOOGLE_", "GEMINI_", "GCLOUD_", "ANTHROPIC_", "OPENAI_"))
        }
        env.update(HOME=str(root), PI_CODING_AGENT_DIR=str(agent), **case.env)
        if case.adc:
            env["GOOGLE_APPLICATION_CREDENTIALS"] = str(_write_adc_file(root, server, scenario))
        run = subprocess.run(
            [pi, "--model", f"{case.provider}/{case.model}", "--thinking", case.thinking, "-p", PROMPT],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if run.returncode != 0:
            raise SystemExit(f"pi failed for {case.name}: {run.stdout}\n{run.stderr}")
        requests = server.requests_for(scenario)
        assert len(requests) == 2, [r.path for r in requests]
        last = requests[-1]
        recording: dict[str, Any] = {
            "path": last.path.replace(scenario, "{scenario}"),
            "query": last.query_string,
            "headers": {k: v for k, v in last.headers.items() if k not in VOLATILE_HEADERS},
            "body": last.body,
        }
        if case.adc:
            recording["token_exchanges"] = server.token_exchanges_for(scenario)
            recording["token_url_path"] = "/s/{scenario}/token"
            recording["issued_tokens"] = server.issued_tokens_for(scenario)
        out = FIXTURES / "llm-requests" / f"{case.name}.json"
        out.write_text(json.dumps(recording, indent=1, ensure_ascii=False) + "\n")
        (session,) = (agent / "sessions").rglob("*.jsonl")
        shutil.copyfile(session, FIXTURES / "sessions" / f"{case.name}.jsonl")
        print(
            f"{case.name}: {last.path}?{last.query_string} -> {out.relative_to(FIXTURES.parent.parent.parent)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pi", default=os.environ.get("PI_BIN") or shutil.which("pi") or "pi")
    args = parser.parse_args()
    server = ScriptedLLMServer()
    server.start_in_thread()
    try:
        for case in CASES:
            record(case, server, args.pi)
    finally:
        server.stop_thread()


if __name__ == "__main__":
    main()
