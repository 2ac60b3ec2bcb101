#!/usr/bin/env python3
"""Record what pi 0.73.1's three OAuth logins send, for tests/test_oauth_login.py to compare
tempi's logins with.

Runs pi-ai's own login functions (loginGitHubCopilot, loginAnthropic, loginOpenAICodex) under
node against the scripted server: their fetches of the providers' real URLs are sent there
instead, and a stand-in browser opens each authorize URL there, which redirects to pi's
callback server (its fixed ports, 53692 and 1455, must be free). Writes the normalized requests
(lib: tempi/testing/scripted_llm/oauth_logins.py `login_requests`) and the credentials pi returned
to tests/fixtures/pi-0.73.1/oauth-logins/<provider>.json.

    uv run python scripts/record_pi_oauth_logins.py [--pi-ai /opt/pi-0.73.1/node_modules/@mariozechner/pi-ai]
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tempi.testing.scripted_llm import ScriptedLLMServer  # noqa: E402
from tempi.testing.scripted_llm.oauth_logins import (  # noqa: E402
    ACCESS_TOKEN_PATH,
    DEVICE_CODE_PATH,
    login_requests,
)

OUT = ROOT / "tests" / "fixtures" / "pi-0.73.1" / "oauth-logins"
DEFAULT_PI_AI = Path("/opt/pi-0.73.1/node_modules/@mariozechner/pi-ai")
SCENARIO = "pi-oauth-login"


def _jwt(claims: dict[str, object]) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.c2ln"


# What the endpoints answer, kept in the recording: the test answers tempi's login alike.
SCRIPTED: dict[str, dict[str, Any]] = {
    "github-copilot": {
        "device": {
            "device_code": "dc-recorded", "user_code": "PIPI-0731",
            "verification_uri": "https://github.com/login/device", "interval": 1, "expires_in": 900,
        },
        "polls": [
            {"error": "authorization_pending"}, {"error": "slow_down", "interval": 1},
            {"access_token": "gho_recorded-github-token", "token_type": "bearer", "scope": "read:user"},
        ],
        "token": {"access": "tid=recorded;exp=99;sku=x", "expires_in": 1800},
    },
    "anthropic": {"token": {"access": "sk-ant-oat01-recorded", "refresh": "sk-ant-ort01-recorded"}},
    "openai-codex": {
        "token": {
            "access": _jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "acct-recorded"}}),
            "refresh": "codex-recorded-refresh",
        }
    },
}  # fmt: skip

_DRIVER = """
import { pathToFileURL } from "node:url";
const [dir, provider, redirectsJson, authorizeBase] = process.argv.slice(2);
const redirects = JSON.parse(redirectsJson);
const original = globalThis.fetch;
globalThis.fetch = (url, init) => {
  let target = String(url);
  for (const [from, to] of redirects) {
    if (target.startsWith(from)) { target = to + target.slice(from.length); break; }
  }
  return original(target, init);
};
const oauth = await import(pathToFileURL(dir + "/dist/utils/oauth/index.js").href);
const browse = (url) => {
  const query = new URL(url).search;
  setTimeout(() => original(authorizeBase + "/oauth/" + provider + "/authorize" + query), 100);
};
const callbacks = {
  onAuth: (info) => { if (provider !== "github-copilot") browse(info.url); },
  onPrompt: async () => "",
  onProgress: () => {},
};
const login = {
  "github-copilot": () => oauth.loginGitHubCopilot({ ...callbacks, onAuth: () => {} }),
  "anthropic": () => oauth.loginAnthropic(callbacks),
  "openai-codex": () => oauth.loginOpenAICodex(callbacks),
}[provider];
const credentials = await login();
process.stdout.write(JSON.stringify(credentials));
"""


def record(server: ScriptedLLMServer, pi_ai: Path, provider: str) -> dict[str, object]:
    base = server.base_url
    oauth = server.oauth
    oauth.reset()
    scripted = SCRIPTED[provider]
    oauth.issue(provider, **scripted["token"])  # type: ignore[arg-type]
    if provider == "github-copilot":
        oauth.login.device_flow(scripted["device"], scripted["polls"])
    redirects = [
        ["https://github.com/login/device/code", base + DEVICE_CODE_PATH],
        ["https://github.com/login/oauth/access_token", base + ACCESS_TOKEN_PATH],
        ["https://api.github.com/copilot_internal/v2/token", oauth.url(base, "github-copilot")],
        ["https://platform.claude.com/v1/oauth/token", oauth.url(base, "anthropic")],
        ["https://auth.openai.com/oauth/token", oauth.url(base, "openai-codex")],
        ["https://api.individual.githubcopilot.com", server.url_for(SCENARIO, "openai-completions")],
    ]
    with tempfile.TemporaryDirectory() as scratch:
        driver = Path(scratch) / "driver.mjs"
        driver.write_text(_DRIVER)
        done = subprocess.run(
            ["node", str(driver), str(pi_ai), provider, json.dumps(redirects), base],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"pi's {provider} login failed:\n{done.stderr}")
    credentials = json.loads(done.stdout)
    return {
        "scripted": scripted,
        "requests": login_requests(oauth, provider),
        "credential_fields": list(credentials),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pi-ai", type=Path, default=DEFAULT_PI_AI)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    server = ScriptedLLMServer()
    server.start_in_thread()
    try:
        for provider in ("github-copilot", "anthropic", "openai-codex"):
            recorded = record(server, args.pi_ai, provider)
            path = OUT / f"{provider}.json"
            path.write_text(json.dumps(recorded, indent=2) + "\n")
            print(f"{path.relative_to(ROOT)}: {len(recorded['requests'])} requests")  # type: ignore[arg-type]
    finally:
        server.stop_thread()


if __name__ == "__main__":
    main()
