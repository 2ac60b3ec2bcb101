"""`/login`'s three flows as pi 0.73.1 runs them (issue 34 item 3), each against the scripted
server's endpoints: GitHub Copilot's device flow (pending, slow_down, authorized; an enterprise
domain; an expired code), Anthropic's PKCE code sent back to the local server or pasted as
`code#state`, OpenAI Codex's PKCE code through its local callback server or pasted when the
port is taken. Each login is written to auth.json as pi writes it."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from temporalio.client import Client

from tempi.agent.model_registry import builtin_registry
from tempi.config.auth_json import auth_json_path
from tempi.config.file_lock import lock_path
from tempi.config.oauth_login import FLOWS, LoginCallbacks, LoginFailed, Prompt, login
from tempi.config.oauth_login.anthropic import exchange_code
from tempi.config.oauth_login.common import parse_authorization_input
from tempi.config.oauth_login.copilot import github_urls, login_github_copilot
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.scripted_llm.oauth_logins import login_requests
from tempi.workflows.session_types import workflow_id_for
from tests.conftest import run_tempi, tempi_env
from tests.fixture_paths import PI_FIXTURES
from tests.history_payloads import payload_texts
from tests.test_auth_keys import codex_jwt

COPILOT_CLIENT_ID = "Iv1.b507a08c87ecfe98"
ANTHROPIC_CLIENT_ID = "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
CODEX_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
LOGIN_FIXTURES = PI_FIXTURES / "oauth-logins"
COPILOT_TOKEN = "tid=login-test;exp=99;proxy-ep=proxy.individual.githubcopilot.com;sku=x"


def _variable(kind: str, provider: str) -> str:
    return f"TEMPI_TEST_OAUTH_{kind}_" + provider.upper().replace("-", "_")


@pytest.fixture
def endpoints(scripted_server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch) -> ScriptedLLMServer:
    """Every OAuth endpoint of the three providers moved to the scripted server, and the
    callback servers to free ports."""
    server = scripted_server
    server.oauth.reset()
    base = server.base_url
    for provider in ("anthropic", "openai-codex", "github-copilot"):
        monkeypatch.setenv(_variable("TOKEN_URL", provider), server.oauth.url(base, provider))  # type: ignore[arg-type]
        monkeypatch.setenv(_variable("CALLBACK_PORT", provider), "0")
    monkeypatch.setenv(
        _variable("DEVICE_CODE_URL", "github-copilot"), f"{base}/oauth/github-copilot/login/device/code"
    )
    monkeypatch.setenv(
        _variable("ACCESS_TOKEN_URL", "github-copilot"),
        f"{base}/oauth/github-copilot/login/oauth/access_token",
    )
    monkeypatch.setenv(
        _variable("API_URL", "github-copilot"), server.url_for("copilot-login", "openai-completions")
    )
    return server


class Seen:
    """What a flow showed the user, and the answers it got."""

    def __init__(self, answers: list[str] | None = None, paste: Callable[[], Awaitable[str]] | None = None):
        self.auth: list[tuple[str, str | None]] = []
        self.prompts: list[Prompt] = []
        self.progress: list[str] = []
        self.answers = list(answers or [])
        self.authorized = asyncio.Event()
        self.callbacks = LoginCallbacks(
            on_auth=self._on_auth, on_prompt=self._on_prompt, on_progress=self.progress.append,
            on_manual_code_input=paste,
        )  # fmt: skip

    def _on_auth(self, url: str, instructions: str | None) -> None:
        self.auth.append((url, instructions))
        self.authorized.set()

    async def _on_prompt(self, prompt: Prompt) -> str:
        self.prompts.append(prompt)
        return self.answers.pop(0)

    def authorize_url(self) -> str:
        return self.auth[-1][0]


def _stored(provider: str) -> dict[str, object]:
    path = auth_json_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not lock_path(path).exists()
    entry: dict[str, object] = json.loads(path.read_text())[provider]
    return entry


def _query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


async def _browser(server: ScriptedLLMServer, provider: str, seen: Seen) -> httpx.Response:
    """The user's browser: opens the authorize URL (at the scripted provider) and follows its
    redirect to the local callback server."""
    await seen.authorized.wait()
    page = f"{server.base_url}/oauth/{provider}/authorize?{urlsplit(seen.authorize_url()).query}"
    async with httpx.AsyncClient() as client:
        return await client.get(page, follow_redirects=True)


# -- GitHub Copilot --------------------------------------------------------------------


async def test_copilot_device_flow_polls_until_authorized_and_stores_pis_entry(
    endpoints: ScriptedLLMServer,
) -> None:
    oauth = endpoints.oauth
    oauth.login.device_flow(
        {"device_code": "dc-1", "user_code": "ABCD-1234", "verification_uri": "https://github.com/login/device",
         "interval": 5, "expires_in": 900},
        [{"error": "authorization_pending"}, {"error": "slow_down", "interval": 10},
         {"access_token": "gho_github-token-1", "token_type": "bearer", "scope": "read:user"}],
    )  # fmt: skip
    oauth.issue("github-copilot", COPILOT_TOKEN, expires_in=1800, accept_refresh="gho_github-token-1")
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    seen = Seen(answers=[""])
    entry = await login_github_copilot(seen.callbacks, sleep=sleep)

    assert seen.prompts == [
        Prompt("GitHub Enterprise URL/domain (blank for github.com)", "company.ghe.com", allow_empty=True)
    ]
    assert seen.auth == [("https://github.com/login/device", "Enter code: ABCD-1234")]
    [start] = oauth.login.requests("device_code")
    assert start.body == {"client_id": COPILOT_CLIENT_ID, "scope": "read:user"}
    assert start.headers["content-type"] == "application/x-www-form-urlencoded"
    assert (start.headers["accept"], start.headers["user-agent"]) == (
        "application/json",
        "GitHubCopilotChat/0.35.0",
    )
    polls = oauth.login.requests("access_token")
    assert [p.body for p in polls] == [
        {"client_id": COPILOT_CLIENT_ID, "device_code": "dc-1",
         "grant_type": "urn:ietf:params:oauth:grant-type:device_code"}
    ] * 3  # fmt: skip
    # pi's pacing: GitHub's interval times 1.2, then its slow_down interval times 1.4.
    assert waits == [6.0, 6.0, 14.0]
    [copilot] = oauth.requests_for("github-copilot")
    assert copilot.headers["authorization"] == "Bearer gho_github-token-1"
    # Every Copilot model's policy accepted, with the Copilot token.
    policies = oauth.login.requests("policy")
    assert {p.path.rsplit("/", 2)[-2] for p in policies} == {
        m.id for m in builtin_registry().models_for("github-copilot")
    }
    assert {p.headers["authorization"] for p in policies} == {f"Bearer {COPILOT_TOKEN}"}
    assert policies[0].body == {"state": "enabled"} and policies[0].headers["openai-intent"] == "chat-policy"
    assert seen.progress == ["Enabling models..."]
    # pi's entry: the GitHub token refreshes, the Copilot token is the key, five minutes' margin.
    assert list(entry) == ["refresh", "access", "expires"]
    assert (entry["refresh"], entry["access"]) == ("gho_github-token-1", COPILOT_TOKEN)
    assert abs(entry["expires"] - (time.time() + 1800) * 1000 + 300_000) < 5_000


async def test_copilot_login_with_an_enterprise_domain_is_stored_with_it(
    endpoints: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    oauth = endpoints.oauth
    oauth.login.device_flow(
        {"device_code": "dc-2", "user_code": "WXYZ-0000", "verification_uri": "https://company.ghe.com/login/device",
         "interval": 1, "expires_in": 60},
        [{"access_token": "ghu_enterprise"}],
    )  # fmt: skip
    oauth.issue("github-copilot", "tid=enterprise", expires_in=1800)
    seen = Seen(answers=["https://Company.GHE.com/some/path"])
    path = await login("github-copilot", seen.callbacks)

    assert path == auth_json_path()
    entry = _stored("github-copilot")
    assert list(entry) == ["type", "refresh", "access", "expires", "enterpriseUrl"]
    assert (entry["type"], entry["access"], entry["enterpriseUrl"]) == (
        "oauth",
        "tid=enterprise",
        "company.ghe.com",
    )
    # Without the test's endpoints, the enterprise's own.
    for variable in ("DEVICE_CODE_URL", "ACCESS_TOKEN_URL"):
        monkeypatch.delenv(_variable(variable, "github-copilot"))
    assert github_urls("company.ghe.com") == (
        "https://company.ghe.com/login/device/code",
        "https://company.ghe.com/login/oauth/access_token",
    )


async def test_copilot_login_fails_on_an_expired_code_or_a_bad_domain_and_stores_nothing(
    endpoints: ScriptedLLMServer,
) -> None:
    oauth = endpoints.oauth
    oauth.login.device_flow(
        {"device_code": "dc-3", "user_code": "LATE-0000", "verification_uri": "https://github.com/login/device",
         "interval": 1, "expires_in": 900},
        [{"error": "expired_token", "error_description": "The device code has expired."}],
    )  # fmt: skip

    async def no_wait(seconds: float) -> None:
        pass

    with pytest.raises(
        LoginFailed, match=r"Device flow failed: expired_token: The device code has expired\."
    ):
        await login_github_copilot(Seen(answers=[""]).callbacks, sleep=no_wait)
    with pytest.raises(LoginFailed, match="Invalid GitHub Enterprise URL/domain"):
        await login("github-copilot", Seen(answers=["not a domain!"]).callbacks)
    assert oauth.requests_for("github-copilot") == []
    assert not auth_json_path().exists()


# -- Anthropic -------------------------------------------------------------------------


async def test_anthropic_code_comes_back_to_the_local_server_and_is_exchanged_with_the_verifier(
    endpoints: ScriptedLLMServer,
) -> None:
    oauth = endpoints.oauth
    oauth.issue("anthropic", "sk-ant-oat01-login", refresh="sk-ant-ort01-login", expires_in=28800)
    seen = Seen()
    browser = asyncio.create_task(_browser(endpoints, "anthropic", seen))
    before = time.time() * 1000
    await login("anthropic", seen.callbacks)
    page = await browser

    assert page.status_code == 200 and "Anthropic authentication completed" in page.text
    url, instructions = seen.auth[0]
    assert url.startswith("https://claude.ai/oauth/authorize?code=true&client_id=")
    asked = _query(url)
    redirect_uri = asked["redirect_uri"]
    assert redirect_uri.startswith("http://localhost:") and redirect_uri.endswith("/callback")
    assert asked == {
        "code": "true", "client_id": ANTHROPIC_CLIENT_ID, "response_type": "code", "redirect_uri": redirect_uri,
        "scope": "org:create_api_key user:profile user:inference user:sessions:claude_code user:mcp_servers "
                 "user:file_upload",
        "code_challenge": asked["code_challenge"], "code_challenge_method": "S256", "state": asked["state"],
    }  # fmt: skip
    assert instructions and "paste the final redirect URL" in instructions
    [exchange] = oauth.requests_for("anthropic")
    assert exchange.status == 200 and exchange.headers["content-type"] == "application/json"
    # The state is the verifier, as in pi; the scripted server checked S256(verifier).
    assert exchange.body == {
        "grant_type": "authorization_code", "client_id": ANTHROPIC_CLIENT_ID, "code": exchange.body["code"],
        "state": asked["state"], "redirect_uri": redirect_uri, "code_verifier": asked["state"],
    }  # fmt: skip
    assert seen.progress == ["Exchanging authorization code for tokens..."]
    entry = _stored("anthropic")
    assert list(entry) == ["type", "refresh", "access", "expires"]
    assert (entry["access"], entry["refresh"]) == ("sk-ant-oat01-login", "sk-ant-ort01-login")
    assert before + 28800_000 - 300_000 <= entry["expires"] <= time.time() * 1000 + 28800_000 - 300_000  # type: ignore[operator]


async def test_anthropic_code_pasted_as_code_hash_state(endpoints: ScriptedLLMServer) -> None:
    oauth = endpoints.oauth
    oauth.issue("anthropic", "sk-ant-oat01-pasted", refresh="sk-ant-ort01-pasted")
    seen: Seen

    async def paste() -> str:
        await seen.authorized.wait()
        code, state = oauth.login.grant("anthropic", seen.authorize_url())
        return f"  {code}#{state}\n"  # as Claude's page shows it

    seen = Seen(paste=paste)
    await login("anthropic", seen.callbacks)
    assert _stored("anthropic")["access"] == "sk-ant-oat01-pasted"
    assert oauth.requests_for("anthropic")[0].status == 200

    # A state that is not this login's is refused before any exchange.
    async def foreign() -> str:
        await seen.authorized.wait()
        code, _ = oauth.login.grant("anthropic", seen.authorize_url())
        return f"{code}#someone-elses-state"

    seen = Seen(paste=foreign)
    with pytest.raises(LoginFailed, match="OAuth state mismatch"):
        await login("anthropic", seen.callbacks)
    assert len(oauth.requests_for("anthropic")) == 1

    # The code is only good with this login's verifier (the scripted server checks S256).
    code, state = oauth.login.grant("anthropic", seen.authorize_url())
    oauth.issue("anthropic", "never-issued", refresh="never")
    redirect_uri = _query(seen.authorize_url())["redirect_uri"]
    with pytest.raises(LoginFailed, match="HTTP 400"):
        await exchange_code(code, state, "a-verifier-of-another-login", redirect_uri)


# -- OpenAI Codex ----------------------------------------------------------------------


async def test_codex_callback_server_takes_the_redirect_and_the_code_is_exchanged(
    endpoints: ScriptedLLMServer,
) -> None:
    oauth = endpoints.oauth
    access = codex_jwt("acct-login-7")
    oauth.issue("openai-codex", access, refresh="codex-refresh-1", expires_in=864000)
    seen = Seen()
    flow = asyncio.create_task(login("openai-codex", seen.callbacks))
    await seen.authorized.wait()
    asked = _query(seen.authorize_url())
    redirect_uri = asked["redirect_uri"]
    # A stray request with another state is refused and the login goes on waiting.
    async with httpx.AsyncClient() as client:
        stray = await client.get(f"{redirect_uri}?code=x&state=wrong")
        lost = await client.get(redirect_uri.replace("/auth/callback", "/elsewhere"))
    assert (stray.status_code, lost.status_code) == (400, 404) and "State mismatch." in stray.text
    assert not flow.done()
    page = await _browser(endpoints, "openai-codex", seen)
    await flow

    assert page.status_code == 200 and "OpenAI authentication completed" in page.text
    assert seen.authorize_url().startswith("https://auth.openai.com/oauth/authorize?response_type=code&")
    assert asked == {
        "response_type": "code", "client_id": CODEX_CLIENT_ID, "redirect_uri": redirect_uri,
        "scope": "openid profile email offline_access", "code_challenge": asked["code_challenge"],
        "code_challenge_method": "S256", "state": asked["state"], "id_token_add_organizations": "true",
        "codex_cli_simplified_flow": "true", "originator": "pi",
    }  # fmt: skip
    assert len(asked["state"]) == 32 and redirect_uri.endswith("/auth/callback")
    [exchange] = oauth.requests_for("openai-codex")
    assert exchange.status == 200 and exchange.headers["content-type"] == "application/x-www-form-urlencoded"
    assert set(exchange.body) == {"grant_type", "client_id", "code", "code_verifier", "redirect_uri"}
    assert (exchange.body["grant_type"], exchange.body["redirect_uri"]) == (
        "authorization_code",
        redirect_uri,
    )
    entry = _stored("openai-codex")
    assert list(entry) == ["type", "access", "refresh", "expires", "accountId"]
    assert (entry["access"], entry["refresh"], entry["accountId"]) == (
        access,
        "codex-refresh-1",
        "acct-login-7",
    )


async def test_codex_redirect_url_pasted_when_the_callback_port_is_taken(
    endpoints: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    oauth = endpoints.oauth
    oauth.issue("openai-codex", codex_jwt("acct-pasted"), refresh="codex-refresh-2")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv(_variable("CALLBACK_PORT", "openai-codex"), str(port))
        seen: Seen

        async def paste() -> str:
            await seen.authorized.wait()
            code, state = oauth.login.grant("openai-codex", seen.authorize_url())
            return f"http://localhost:{port}/auth/callback?code={code}&state={state}"

        seen = Seen(paste=paste)
        await login("openai-codex", seen.callbacks)
    assert _query(seen.authorize_url())["redirect_uri"] == f"http://localhost:{port}/auth/callback"
    assert _stored("openai-codex")["accountId"] == "acct-pasted"


def test_pasted_input_is_read_as_pi_reads_it() -> None:
    assert parse_authorization_input("http://localhost:1455/auth/callback?code=c1&state=s1") == ("c1", "s1")
    assert parse_authorization_input("c2#s2") == ("c2", "s2")
    assert parse_authorization_input("code=c3&state=s3") == ("c3", "s3")
    assert parse_authorization_input(" c4 ") == ("c4", None)
    assert parse_authorization_input("   ") == (None, None)


def test_a_login_replaces_only_its_own_entry(tmp_path: Path) -> None:
    from tempi.config.oauth_login import save_login

    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"openai": {"type": "api_key", "key": "K"}, "anthropic": {"type": "oauth"}}))
    save_login("anthropic", {"refresh": "r", "access": "a", "expires": 1}, path)
    assert json.loads(path.read_text()) == {
        "openai": {"type": "api_key", "key": "K"},
        "anthropic": {"type": "oauth", "refresh": "r", "access": "a", "expires": 1},
    }


# -- a login, then the model ------------------------------------------------------------


async def test_logins_made_here_are_the_keys_of_the_next_runs_and_stay_out_of_history(
    endpoints: ScriptedLLMServer, tmp_path: Path, temporal_address: str, temporal_client: Client
) -> None:
    """Claude and ChatGPT logins made by the flows; `tempi -p` then sends each login's token
    as the model's key, and neither token reaches the workflow history, the session file or
    the output."""
    oauth = endpoints.oauth
    scenario = "login-then-model"
    endpoints.add_scenario(
        scenario, {"select": "sequential", "turns": [{"text": "claude ok"}, {"text": "codex ok"}]}
    )
    claude_access, claude_refresh = "sk-ant-oat01-e2e-login-3c1d", "sk-ant-ort01-e2e-login-9a0b"
    codex_access, codex_refresh = codex_jwt("acct-e2e"), "codex-e2e-refresh-71fe"
    oauth.issue("anthropic", claude_access, refresh=claude_refresh)
    oauth.issue("openai-codex", codex_access, refresh=codex_refresh)
    seen = Seen()
    browser = asyncio.create_task(_browser(endpoints, "anthropic", seen))
    await login("anthropic", seen.callbacks)
    await browser
    seen = Seen()
    browser = asyncio.create_task(_browser(endpoints, "openai-codex", seen))
    await login("openai-codex", seen.callbacks)
    await browser

    home, work = Path(os.environ["TEMPI_HOME"]), tmp_path / "work"
    work.mkdir()
    (home / "models.json").write_text(
        json.dumps(
            {
                "providers": {
                    "anthropic": {"baseUrl": endpoints.url_for(scenario, "anthropic-messages")},
                    "openai-codex": {"baseUrl": endpoints.url_for(scenario, "openai-codex-responses")},
                }
            }
        )
    )
    env = tempi_env(home, temporal_address)
    outputs = []
    for model in ("anthropic/claude-sonnet-4-5", "openai-codex/gpt-5.1"):
        proc = await asyncio.to_thread(
            run_tempi, ["--mode", "json", "--model", model, "-p", "hi"], cwd=work, env=env
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout + proc.stderr)
    claude, codex = endpoints.requests_for(scenario)
    assert claude.headers["authorization"] == f"Bearer {claude_access}"
    assert codex.headers["authorization"] == f"Bearer {codex_access}"
    assert codex.headers["chatgpt-account-id"] == "acct-e2e"
    assert "claude ok" in outputs[0] and "codex ok" in outputs[1]

    searched: list[str] = []
    for output in outputs:
        session_id = json.loads(output.splitlines()[0])["id"]
        history = await temporal_client.get_workflow_handle(workflow_id_for(session_id)).fetch_history()
        exported = history.to_json()
        (session_file,) = (home / "sessions").rglob(f"*{session_id}*.jsonl")
        searched += [exported, *payload_texts(json.loads(exported)), session_file.read_text(), output]
    assert any("codex ok" in text for text in searched)  # the payloads really were decoded
    for secret in (claude_access, claude_refresh, codex_access, codex_refresh):
        assert not any(secret in text for text in searched)


# -- as pi sends them ---------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["github-copilot", "anthropic", "openai-codex"])
async def test_each_login_sends_what_pi_sends(endpoints: ScriptedLLMServer, provider: str) -> None:
    """The same endpoints' answers as in pi 0.73.1's recorded login
    (scripts/record_pi_oauth_logins.py): the same requests, in the same order, with the same
    headers and bodies (random values and the callback port aside), and the same credentials."""
    recorded = json.loads((LOGIN_FIXTURES / f"{provider}.json").read_text())
    scripted = recorded["scripted"]
    oauth = endpoints.oauth
    oauth.issue(provider, **scripted["token"])
    seen = Seen(answers=[""])
    if provider == "github-copilot":
        oauth.login.device_flow(scripted["device"], scripted["polls"])

        async def no_wait(seconds: float) -> None:
            pass

        credentials = await login_github_copilot(seen.callbacks, sleep=no_wait)
    else:
        browser = asyncio.create_task(_browser(endpoints, provider, seen))
        credentials = await FLOWS[provider](seen.callbacks)
        await browser
    sent = login_requests(oauth, provider)
    assert [(r["kind"], r["method"]) for r in sent] == [
        (r["kind"], r["method"]) for r in recorded["requests"]
    ]
    for ours, pis in zip(sent, recorded["requests"], strict=True):
        assert ours["headers"] == pis["headers"], ours["kind"]
        assert list(ours["body"].items()) == list(pis["body"].items()), ours["kind"]
    assert list(credentials) == recorded["credential_fields"]
