#!/usr/bin/env python3
"""Record what pi 0.73.1 sends to Amazon Bedrock (`bedrock-converse-stream`).

pi runs offline against tempi's scripted LLM server (its Bedrock route speaks the AWS
event-stream), with a throwaway home whose models.json points the built-in `amazon-bedrock`
provider there. Two runs:

- SigV4: the scripted AWS key pair, `AWS_REGION=us-east-1`, `AWS_BEDROCK_FORCE_HTTP1=1` (the
  server is plain HTTP); the server verifies pi's signature. The `bedrock-tools` scenario
  (thinking, a tool call, two parallel tool calls, an answer) with `--thinking medium`; its
  last request goes to `llm-requests/bedrock-converse-stream.json` and pi's session file to
  `sessions/bedrock-tools.jsonl`.
- Bearer: `AWS_BEARER_TOKEN_BEDROCK` only; the one request goes to
  `llm-requests/bedrock-converse-stream-bearer.json`.

    uv run python scripts/record_pi_bedrock.py [--pi PI_BIN]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tempi.testing.scripted_llm import ScriptedLLMServer  # noqa: E402
from tempi.testing.scripted_llm.bedrock_auth import (  # noqa: E402
    SCRIPTED_AWS_ACCESS_KEY_ID,
    SCRIPTED_AWS_SECRET_ACCESS_KEY,
)

FIXTURES = ROOT / "tests" / "fixtures" / "pi-0.73.1"
SCENARIO = FIXTURES / "scenarios" / "bedrock-tools.json"
MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
PROMPT = "Write notes.txt saying hello, then show it and list the directory."
BEARER_TOKEN = "scripted-bedrock-api-key"
API = "bedrock-converse-stream"


def _run_pi(
    pi: str, server: ScriptedLLMServer, scenario: str, env_extra: dict[str, str], args: list[str]
) -> Path:
    """Run pi once in a fresh home; the directory of its session files."""
    home = Path(tempfile.mkdtemp(prefix="pi-bedrock-"))
    agent = home / ".pi" / "agent"
    agent.mkdir(parents=True)
    models = {"providers": {"amazon-bedrock": {"baseUrl": server.url_for(scenario, API)}}}
    (agent / "models.json").write_text(json.dumps(models))
    work = home / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ANTHROPIC_", "OPENAI_"))}
    env.update(HOME=str(home), PI_CODING_AGENT_DIR=str(agent), PI_OFFLINE="1", **env_extra)
    proc = subprocess.run(
        [pi, "--model", f"amazon-bedrock/{MODEL}", *args, "-p", PROMPT],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if proc.returncode != 0:
        raise SystemExit(f"pi failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return agent / "sessions"


def _write_request(name: str, server: ScriptedLLMServer, scenario: str, which: int) -> None:
    requests = server.requests_for(scenario)
    if not requests or any(r.status != 200 for r in requests):
        raise SystemExit(f"{scenario}: unexpected requests {[(r.path, r.status) for r in requests]}")
    request = requests[which]
    recorded = {"method": "POST", "path": request.raw_path, "headers": request.headers, "body": request.body}
    (FIXTURES / "llm-requests" / name).write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote llm-requests/{name} ({len(requests)} requests served)")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pi", default=os.environ.get("PI_BIN") or shutil.which("pi") or "pi")
    pi = parser.parse_args().pi
    turns = json.loads(SCENARIO.read_text())
    server = ScriptedLLMServer({"bedrock": turns, "bedrock-bearer": [{"text": "Hello."}]})
    server.start_in_thread()
    try:
        sessions = _run_pi(
            pi,
            server,
            "bedrock",
            {
                "AWS_ACCESS_KEY_ID": SCRIPTED_AWS_ACCESS_KEY_ID,
                "AWS_SECRET_ACCESS_KEY": SCRIPTED_AWS_SECRET_ACCESS_KEY,
                "AWS_REGION": "us-east-1",
                "AWS_BEDROCK_FORCE_HTTP1": "1",
            },
            ["--thinking", "medium"],
        )
        _write_request("bedrock-converse-stream.json", server, "bedrock", -1)
        (session,) = sessions.rglob("*.jsonl")
        shutil.copyfile(session, FIXTURES / "sessions" / "bedrock-tools.jsonl")
        print("wrote sessions/bedrock-tools.jsonl")
        _run_pi(
            pi,
            server,
            "bedrock-bearer",
            {
                "AWS_BEARER_TOKEN_BEDROCK": BEARER_TOKEN,
                "AWS_REGION": "us-east-1",
                "AWS_BEDROCK_FORCE_HTTP1": "1",
            },
            [],
        )
        _write_request("bedrock-converse-stream-bearer.json", server, "bedrock-bearer", 0)
    finally:
        server.stop_thread()
    return 0


if __name__ == "__main__":
    sys.exit(main())
