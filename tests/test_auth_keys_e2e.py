"""Keys and logins end to end (issue 34 item 3): pi's key order through the real CLI, an expired
Claude login refreshed on the worker and sent as pi sends it, no key or token of any provider in
the workflow history or the session file, and one login shared with a running pi 0.73.1: pi
refreshes and tempi uses its token, tempi refreshes and pi uses its token."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows.session_types import workflow_id_for
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.history_payloads import payload_texts
from tests.pi_bin import pi_bin

DAY_MS = 24 * 3600 * 1000
TOKEN_URL_VARIABLE = "TEMPI_TEST_OAUTH_TOKEN_URL_ANTHROPIC"
CLAUDE = "claude-sonnet-4-5"
# Loaded into pi with --require: pi's token URL is a constant, so its fetch is sent to the
# scripted token endpoint instead (nothing else of pi changes).
FETCH_REDIRECT = """
const target = process.env.PI_TEST_TOKEN_URL;
const original = globalThis.fetch;
globalThis.fetch = (url, init) =>
  original(String(url) === "https://platform.claude.com/v1/oauth/token" ? target : url, init);
"""


def _authorization(headers: dict[str, str]) -> str | None:
    return headers.get("authorization")


def _claude_provider(server: ScriptedLLMServer, scenario: str) -> dict[str, Any]:
    """models.json moving the built-in anthropic provider to the scripted server."""
    return {"providers": {"anthropic": {"baseUrl": server.url_for(scenario, "anthropic-messages")}}}


def _login(access: str, refresh: str, expires: int) -> dict[str, Any]:
    return {"type": "oauth", "access": access, "refresh": refresh, "expires": expires}


@pytest.mark.slow
def test_key_precedence_through_the_cli(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    """models.json's apiKey < OPENAI_API_KEY < auth.json < --api-key, each seen on the wire."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    scenario = "key-precedence-cli"
    scripted_server.add_scenario(scenario, {"select": "sequential", "turns": [{"text": "ok"}] * 4})
    write_models_json(home, scripted_server, scenario, provider="openai")
    models = json.loads((home / "models.json").read_text())
    models["providers"]["openai"]["apiKey"] = "!echo sk-from-models-json"
    (home / "models.json").write_text(json.dumps(models))
    args = ["--model", "openai/mock-model", "--no-session", "-p", "hi"]

    def sent(extra: list[str] = [], **env: str) -> str | None:  # noqa: B006
        before = len(scripted_server.requests_for(scenario))
        proc = run_tempi([*extra, *args], cwd=work, env=tempi_env(home, temporal_address, **env))
        assert proc.returncode == 0, proc.stderr
        return _authorization(scripted_server.requests_for(scenario)[before].headers)

    assert sent() == "Bearer sk-from-models-json"
    assert sent(OPENAI_API_KEY="sk-from-env") == "Bearer sk-from-env"
    (home / "auth.json").write_text(json.dumps({"openai": {"type": "api_key", "key": "sk-from-auth-json"}}))
    assert sent(OPENAI_API_KEY="sk-from-env") == "Bearer sk-from-auth-json"
    assert sent(["--api-key", "sk-from-flag"], OPENAI_API_KEY="sk-from-env") == "Bearer sk-from-flag"


async def test_expired_login_is_refreshed_on_the_worker_and_no_secret_reaches_history(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    """Keys of several providers (environment, auth.json key and command, an OAuth login) are
    configured; the Claude login has expired. The worker refreshes it against the token
    endpoint, the model gets the new token the way pi sends a login's, and no key, token or
    refresh token appears in the workflow history, the session file or the output."""
    oauth = scripted_server.oauth
    oauth.reset()
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    home.mkdir()
    scenario = "login-refresh-e2e"
    scripted_server.add_scenario(
        scenario,
        [{"tool_calls": [{"name": "Bash", "arguments": {"command": "echo ran-by-bash"}}]}, {"text": "done"}],
    )
    (home / "models.json").write_text(json.dumps(_claude_provider(scripted_server, scenario)))
    secrets = {
        "old_access": "sk-ant-oat01-OLD-access-5a1d",
        "old_refresh": "rt-OLD-refresh-77c2",
        "new_access": "sk-ant-oat01-NEW-access-9e4b",
        "new_refresh": "rt-NEW-refresh-31f0",
        "openai_cmd": "sk-openai-from-command-4412",
        "google_literal": "AIza-google-literal-8830",
        "copilot_access": "tid=secret-copilot-access;exp=9;proxy-ep=proxy.individual.githubcopilot.com",
        "copilot_refresh": "gho_copilot-refresh-6127",
        "env_openrouter": "sk-or-env-2290",
        "env_anthropic": "sk-ant-api-env-0071",
        "env_aws_secret": "aws-secret-env-5531",
    }
    (home / "auth.json").write_text(
        json.dumps(
            {
                "anthropic": _login(secrets["old_access"], secrets["old_refresh"], 1),
                "openai": {"type": "api_key", "key": f"!echo {secrets['openai_cmd']}"},
                "google": {"type": "api_key", "key": secrets["google_literal"]},
                "github-copilot": _login(
                    secrets["copilot_access"], secrets["copilot_refresh"], int(time.time() * 1000) + DAY_MS
                ),
            }
        )
    )
    oauth.issue(
        "anthropic",
        secrets["new_access"],
        refresh=secrets["new_refresh"],
        accept_refresh=secrets["old_refresh"],
    )
    env = tempi_env(
        home,
        temporal_address,
        **{
            TOKEN_URL_VARIABLE: oauth.url(scripted_server.base_url, "anthropic"),
            "OPENROUTER_API_KEY": secrets["env_openrouter"],
            "ANTHROPIC_API_KEY": secrets["env_anthropic"],
            "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
            "AWS_SECRET_ACCESS_KEY": secrets["env_aws_secret"],
        },
    )
    proc = await asyncio.to_thread(
        run_tempi, ["--mode", "json", "--model", f"anthropic/{CLAUDE}", "-p", "Run it"], cwd=work, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert "done" in proc.stdout and "ran-by-bash" in proc.stdout

    # Refreshed once, with the old refresh token; the new tokens are in auth.json.
    assert [r.body["refresh_token"] for r in oauth.requests_for("anthropic")] == [secrets["old_refresh"]]
    stored = json.loads((home / "auth.json").read_text())["anthropic"]
    assert (stored["access"], stored["refresh"]) == (secrets["new_access"], secrets["new_refresh"])
    # Sent as pi sends a login's requests: Bearer, Claude Code's identity, its tool names.
    requests = scripted_server.requests_for(scenario)
    assert len(requests) == 2
    for request in requests:
        headers = request.headers
        assert headers["authorization"] == f"Bearer {secrets['new_access']}"
        assert "x-api-key" not in headers
        assert headers["anthropic-beta"].startswith("claude-code-20250219,oauth-2025-04-20")
        assert (headers["user-agent"], headers["x-app"]) == ("claude-cli/2.1.75", "cli")
        assert (
            request.body["system"][0]["text"] == "You are Claude Code, Anthropic's official CLI for Claude."
        )
        assert {"Bash", "Read", "Edit", "Write"} <= {t["name"] for t in request.body["tools"]}
    replayed = [b for m in requests[1].body["messages"] for b in m["content"] if isinstance(b, dict)]
    assert any(b.get("type") == "tool_use" and b["name"] == "Bash" for b in replayed)

    session_id = json.loads(proc.stdout.splitlines()[0])["id"]
    history = await temporal_client.get_workflow_handle(workflow_id_for(session_id)).fetch_history()
    exported = history.to_json()
    searched = exported + "\n".join(payload_texts(json.loads(exported)))
    assert "ran-by-bash" in searched  # the payloads really were decoded
    (session_file,) = (home / "sessions").rglob(f"*{session_id}*.jsonl")
    session_text = session_file.read_text()
    assert "ran-by-bash" in session_text
    for name, secret in secrets.items():
        for where, text in (
            ("history", searched),
            ("session file", session_text),
            ("output", proc.stdout + proc.stderr),
        ):
            assert secret not in text, f"{name} leaked into the {where}"


def _run_pi(pi: str, work: Path, env: dict[str, str], token_url: str) -> subprocess.CompletedProcess[str]:
    preload = work.parent / "redirect-token-fetch.cjs"
    preload.write_text(FETCH_REDIRECT)
    pi_env = {
        **env,
        "PI_OFFLINE": "1",
        "PI_TEST_TOKEN_URL": token_url,
        "NODE_OPTIONS": f"--require {preload}",
    }
    return subprocess.run(
        [pi, "--model", f"anthropic/{CLAUDE}", "--no-session", "-p", "hi"],
        cwd=work,
        env=pi_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_pi_and_tempi_share_one_login(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    """One auth.json (pi's: tempi has none of its own): pi refreshes the expired login and tempi
    uses pi's new token without refreshing; then tempi refreshes and pi uses tempi's token.
    Refresh tokens rotate, so a second refresh of the same one would be refused."""
    pi = pi_bin()
    oauth = scripted_server.oauth
    oauth.reset()
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    pi_dir = home / ".no-pi-agent"  # tempi_env's PI_CODING_AGENT_DIR: pi's directory for both
    pi_dir.mkdir(parents=True)
    scenario = "shared-login"
    scripted_server.add_scenario(scenario, {"select": "sequential", "turns": [{"text": "hello"}] * 4})
    (pi_dir / "models.json").write_text(json.dumps(_claude_provider(scripted_server, scenario)))
    auth = pi_dir / "auth.json"
    auth.write_text(json.dumps({"anthropic": _login("sk-ant-oat01-first", "rt-1", 1)}))
    token_url = oauth.url(scripted_server.base_url, "anthropic")
    env = tempi_env(home, temporal_address, **{TOKEN_URL_VARIABLE: token_url})
    tempi_args = ["--model", f"anthropic/{CLAUDE}", "--no-session", "-p", "hi"]

    def bearer(index: int) -> str | None:
        return _authorization(scripted_server.requests_for(scenario)[index].headers)

    # pi finds the login expired and refreshes it.
    oauth.issue("anthropic", "sk-ant-oat01-by-pi", refresh="rt-2", accept_refresh="rt-1")
    by_pi = _run_pi(pi, work, env, token_url)
    assert by_pi.returncode == 0, by_pi.stderr
    assert bearer(0) == "Bearer sk-ant-oat01-by-pi"
    assert json.loads(auth.read_text())["anthropic"]["refresh"] == "rt-2"
    # tempi reads pi's refreshed login: no refresh of its own.
    first = run_tempi(tempi_args, cwd=work, env=env)
    assert first.returncode == 0, first.stderr
    assert bearer(1) == "Bearer sk-ant-oat01-by-pi"
    assert len(oauth.requests_for("anthropic")) == 1
    assert not (home / "auth.json").exists()  # tempi wrote to pi's file, made none of its own

    # The login expires again; this time tempi refreshes it.
    expired = json.loads(auth.read_text())
    expired["anthropic"]["expires"] = 1
    auth.write_text(json.dumps(expired))
    oauth.issue("anthropic", "sk-ant-oat01-by-tempi", refresh="rt-3", accept_refresh="rt-2")
    second = run_tempi(tempi_args, cwd=work, env=env)
    assert second.returncode == 0, second.stderr
    assert bearer(2) == "Bearer sk-ant-oat01-by-tempi"
    # pi reads tempi's refreshed login: no refresh of its own.
    after = _run_pi(pi, work, env, token_url)
    assert after.returncode == 0, after.stderr
    assert bearer(3) == "Bearer sk-ant-oat01-by-tempi"
    assert [r.body["refresh_token"] for r in oauth.requests_for("anthropic")] == ["rt-1", "rt-2"]
    assert oct(os.stat(auth).st_mode & 0o777) == "0o600"

    # Both sent the login's requests alike.
    pis, tempis = (scripted_server.requests_for(scenario)[i] for i in (0, 1))
    for header in ("authorization", "user-agent", "x-app"):
        assert pis.headers[header] == tempis.headers[header], header
    assert pis.headers["anthropic-beta"].split(",")[:2] == tempis.headers["anthropic-beta"].split(",")[:2]
    assert pis.body["system"][0] == tempis.body["system"][0]
    assert sorted(t["name"] for t in pis.body["tools"]) == sorted(t["name"] for t in tempis.body["tools"])


@pytest.mark.slow
def test_tempi_waits_for_a_refresh_pi_is_making(
    tmp_path: Path, scripted_server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pi is inside its lock, refreshing (its token request held back); tempi's worker-side
    resolution of the same expired login waits for the lock, then uses pi's new token instead
    of spending the refresh token a second time."""
    import sys
    import threading

    from tempi.agent.model_registry import builtin_registry
    from tempi.config.api_keys import resolve_api_key
    from tempi.config.file_lock import lock_path

    pi = pi_bin()
    oauth = scripted_server.oauth
    oauth.reset()
    work = tmp_path / "work"
    work.mkdir()
    pi_dir = Path(os.environ["PI_CODING_AGENT_DIR"])
    pi_dir.mkdir(parents=True)
    scenario = "refresh-race"
    scripted_server.add_scenario(scenario, [{"text": "hello"}])
    (pi_dir / "models.json").write_text(json.dumps(_claude_provider(scripted_server, scenario)))
    auth = pi_dir / "auth.json"
    auth.write_text(json.dumps({"anthropic": _login("sk-ant-oat01-stale", "rt-1", 1)}))
    token_url = oauth.url(scripted_server.base_url, "anthropic")
    monkeypatch.setenv(TOKEN_URL_VARIABLE, token_url)
    oauth.issue("anthropic", "sk-ant-oat01-pis-refresh", refresh="rt-2", accept_refresh="rt-1")
    attempts: list[str] = []
    watching = [True]
    sys.addaudithook(
        lambda e, a: attempts.append(os.fsdecode(a[0])) if watching[0] and e == "os.mkdir" else None
    )  # type: ignore[arg-type]
    oauth.hold()
    preload = tmp_path / "redirect-token-fetch.cjs"
    preload.write_text(FETCH_REDIRECT)
    env = {
        **os.environ,
        "PI_OFFLINE": "1",
        "PI_TEST_TOKEN_URL": token_url,
        "NODE_OPTIONS": f"--require {preload}",
    }
    proc = subprocess.Popen(
        [pi, "--model", f"anthropic/{CLAUDE}", "--no-session", "-p", "hi"],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert oauth.wait_for_request("anthropic"), "pi never asked for a new token"
        assert lock_path(auth).is_dir()  # pi holds auth.json's lock while it waits
        result: list[object] = []
        resolver = threading.Thread(
            target=lambda: result.append(resolve_api_key("anthropic", builtin_registry(), {}))
        )
        resolver.start()
        deadline = time.monotonic() + 30
        while str(lock_path(auth)) not in attempts:
            assert time.monotonic() < deadline, "tempi never tried the lock"
            time.sleep(0.01)
        assert resolver.is_alive()
        oauth.release()
        resolver.join(120)
        _, err = proc.communicate(timeout=120)
    finally:
        watching[0] = False
        oauth.release()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert result == ["sk-ant-oat01-pis-refresh"]
    assert [r.body["refresh_token"] for r in oauth.requests_for("anthropic")] == ["rt-1"]
