"""`/login` in a real terminal (tmux), as pi's interactive mode runs it (issue 34 item 3):
the provider picker, GitHub Copilot's enterprise question, the device code shown while the
login polls GitHub (scripted), the login stored in auth.json, and a Copilot model answering
with the new token. No token reaches the screen, the session file or the prompt history."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tempi.cli.interactive.input_editor import HISTORY_FILE
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import tempi_env
from tests.test_interactive_terminal import Terminal, _setup, terminals

# A slow end-to-end group that drives a real terminal, as tests/test_interactive_terminal.py;
# tests/test_oauth_login.py covers each flow quickly.
pytestmark = [pytest.mark.slow]
__all__ = ["terminals"]  # the fixture

START_S = 90.0
GITHUB_TOKEN = "gho_terminal-login-5f3a"
COPILOT_TOKEN = "tid=terminal-copilot-token-81c2;exp=99;sku=x"


def _run(t: Terminal, line: str) -> None:
    t.type(line)
    t.keys("Enter")


def test_login_to_copilot_with_the_device_flow_then_ask_a_copilot_model(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    scenario = "terminal-copilot-login"
    home, work = _setup(
        tmp_path, scripted_server, scenario, {"select": "sequential", "turns": [{"text": "Copilot answers."}]}
    )
    oauth = scripted_server.oauth
    oauth.reset()
    base = scripted_server.base_url
    oauth.login.device_flow(
        {"device_code": "dc-terminal", "user_code": "TERM-4242",
         "verification_uri": f"{base}/login/device", "interval": 1, "expires_in": 900},
        [{"error": "authorization_pending"}, {"access_token": GITHUB_TOKEN}],
    )  # fmt: skip
    oauth.issue("github-copilot", COPILOT_TOKEN, expires_in=1800, accept_refresh=GITHUB_TOKEN)
    env = tempi_env(
        home,
        temporal_address,
        TEMPI_TEST_OAUTH_DEVICE_CODE_URL_GITHUB_COPILOT=f"{base}/oauth/github-copilot/login/device/code",
        TEMPI_TEST_OAUTH_ACCESS_TOKEN_URL_GITHUB_COPILOT=f"{base}/oauth/github-copilot/login/oauth/access_token",
        TEMPI_TEST_OAUTH_TOKEN_URL_GITHUB_COPILOT=oauth.url(base, "github-copilot"),
        TEMPI_TEST_OAUTH_API_URL_GITHUB_COPILOT=scripted_server.url_for(scenario, "openai-completions"),
    )
    t = Terminal(["--model", "mock/mock-model"], cwd=work, env=env)
    terminals.append(t)
    t.wait_for("mock/mock-model", timeout=START_S)

    _run(t, "/login")
    t.wait_for("Select provider to login:")
    screen = t.screen()
    assert "Anthropic (Claude Pro/Max)" in screen and "ChatGPT Plus/Pro (Codex Subscription)" in screen
    t.type("copilot")
    t.keys("Enter")
    t.wait_for("GitHub Enterprise URL/domain (blank for github.com)")
    t.keys("Enter")  # github.com
    screen = t.wait_for("Waiting for browser authentication...")
    assert f"{base}/login/device" in screen and "Enter code: TERM-4242" in screen
    screen = t.wait_for("Logged in to GitHub Copilot. Credentials saved to")
    assert str(home / "auth.json") in screen

    auth = home / "auth.json"
    assert stat.S_IMODE(auth.stat().st_mode) == 0o600
    entry = json.loads(auth.read_text())["github-copilot"]
    assert list(entry) == ["type", "refresh", "access", "expires"]
    assert (entry["refresh"], entry["access"]) == (GITHUB_TOKEN, COPILOT_TOKEN)
    assert len(oauth.login.requests("access_token")) == 2  # pending, then the token

    # The login's models answer with its token.
    _run(t, "/model github-copilot/gpt-4.1")
    t.wait_for("Model: github-copilot/gpt-4.1")
    _run(t, "hello copilot")
    screen = t.wait_for("Copilot answers.")
    [request] = scripted_server.requests_for(scenario)
    assert request.headers["authorization"] == f"Bearer {COPILOT_TOKEN}"
    assert request.body["model"] == "gpt-4.1"
    _run(t, "/quit")
    screen = t.wait_for("[tempi exited 0]")

    (session_file,) = (home / "sessions").rglob("*.jsonl")
    session_text = session_file.read_text()
    assert "hello copilot" in session_text
    history = (home / HISTORY_FILE).read_text()
    assert "hello copilot" in history and "/login" in history
    for secret in (GITHUB_TOKEN, COPILOT_TOKEN, "terminal-copilot-token"):
        for where, text in (("screen", screen), ("session file", session_text), ("history", history)):
            assert secret not in text, f"a token reached the {where}"


def test_login_cancelled_with_esc_stores_nothing(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(tmp_path, scripted_server, "terminal-login-cancel", [{"text": "unused"}])
    t = Terminal(["--model", "mock/mock-model"], cwd=work, env=tempi_env(home, temporal_address))
    terminals.append(t)
    t.wait_for("mock/mock-model", timeout=START_S)
    _run(t, "/login anthropic-nope")
    t.wait_for("No login for 'anthropic-nope'. /login logs in to: anthropic")
    _run(t, "/login github-copilot")
    t.wait_for("GitHub Enterprise URL/domain (blank for github.com)")
    t.keys("Escape")
    t.wait_for("Login cancelled.")
    # The editor is the editor again.
    _run(t, "/logout")
    t.wait_for("Usage: /logout <provider>")
    assert not (home / "auth.json").exists()
