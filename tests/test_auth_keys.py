"""Keys and logins as pi 0.73.1 finds them (issue 34 item 3): pi's key variables, auth.json
(pi's or tempi's own) with API keys and OAuth logins, pi's precedence, refresh of an expired
login against a token endpoint, and auth.json's lock, shared with pi's proper-lockfile."""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tempi.agent.model_registry import builtin_registry
from tempi.cli.interactive.login_commands import logout_text
from tempi.config.api_keys import (
    clear_runtime_api_keys,
    has_configured_key,
    resolve_api_key,
    set_runtime_api_key,
)
from tempi.config.auth_json import auth_json_path, read_auth
from tempi.config.env_api_keys import AUTHENTICATED, env_api_key
from tempi.config.errors import ConfigError
from tempi.config.file_lock import lock_path, locked
from tempi.config.models_json import load_model_registry
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.node_lockfile import NodeLockfile, node_lockfile

__all__ = ["node_lockfile"]  # the fixture

DAY_MS = 24 * 3600 * 1000


def now_ms() -> int:
    return int(time.time() * 1000)


def write_auth(path: Path, entries: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries))
    return path


def pi_auth() -> Path:
    return Path(os.environ["PI_CODING_AGENT_DIR"]) / "auth.json"


def tempi_auth() -> Path:
    return Path(os.environ["TEMPI_HOME"]) / "auth.json"


def codex_jwt(account: str) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    claims = {"https://api.openai.com/auth": {"chatgpt_account_id": account}}
    return f"{part({'alg': 'none'})}.{part(claims)}.c2ln"


@pytest.fixture(autouse=True)
def _no_runtime_keys() -> Iterator[None]:
    yield
    clear_runtime_api_keys()


@pytest.fixture
def token_urls(scripted_server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch) -> ScriptedLLMServer:
    scripted_server.oauth.reset()
    for provider in ("anthropic", "openai-codex", "github-copilot"):
        variable = "TEMPI_TEST_OAUTH_TOKEN_URL_" + provider.upper().replace("-", "_")
        monkeypatch.setenv(variable, scripted_server.oauth.url(scripted_server.base_url, provider))  # type: ignore[arg-type]
    return scripted_server


# -- environment variables -------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "env", "expected"),
    [
        ("anthropic", {"ANTHROPIC_API_KEY": "api", "ANTHROPIC_OAUTH_TOKEN": "oat"}, "oat"),
        ("anthropic", {"ANTHROPIC_API_KEY": "api"}, "api"),
        ("github-copilot", {"GITHUB_TOKEN": "gh3", "GH_TOKEN": "gh2"}, "gh2"),
        ("github-copilot", {"GITHUB_TOKEN": "gh3", "GH_TOKEN": "gh2", "COPILOT_GITHUB_TOKEN": "gh1"}, "gh1"),
        ("google-vertex", {"GOOGLE_CLOUD_API_KEY": "vx"}, "vx"),
        ("google", {"GEMINI_API_KEY": "gm"}, "gm"),
        ("cloudflare-ai-gateway", {"CLOUDFLARE_API_KEY": "cf"}, "cf"),
        ("mistral", {"MISTRAL_API_KEY": "ms"}, "ms"),
        ("openai-codex", {"OPENAI_API_KEY": "not-for-codex"}, None),
    ],
)
def test_pis_key_variables_first_set_wins(provider: str, env: dict[str, str], expected: str | None) -> None:
    assert env_api_key(provider, env) == expected
    assert has_configured_key(provider, builtin_registry(), env) is (expected is not None)


@pytest.mark.parametrize(
    "env",
    [
        {"AWS_PROFILE": "dev"},
        {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s"},
        {"AWS_BEARER_TOKEN_BEDROCK": "b"},
        {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/creds"},
        {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.2/creds"},
        {"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token"},
    ],
)
def test_bedrock_credentials_count_as_a_key(env: dict[str, str]) -> None:
    assert env_api_key("amazon-bedrock", env) == AUTHENTICATED
    assert has_configured_key("amazon-bedrock", builtin_registry(), env)


def test_bedrock_needs_both_halves_of_an_access_key() -> None:
    assert env_api_key("amazon-bedrock", {"AWS_ACCESS_KEY_ID": "AKIA"}) is None


def test_vertex_adc_counts_as_a_key_with_file_project_and_location(tmp_path: Path) -> None:
    adc = tmp_path / "adc.json"
    adc.write_text("{}")
    env = {
        "GOOGLE_APPLICATION_CREDENTIALS": str(adc),
        "GCLOUD_PROJECT": "p",
        "GOOGLE_CLOUD_LOCATION": "us-central1",
    }
    assert env_api_key("google-vertex", env) == AUTHENTICATED
    assert env_api_key("google-vertex", {**env, "GOOGLE_CLOUD_LOCATION": ""}) is None
    assert (
        env_api_key("google-vertex", {**env, "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "no")}) is None
    )
    # Without the variable, gcloud's default file under HOME.
    home = tmp_path / "home"
    write_auth(home / ".config" / "gcloud" / "application_default_credentials.json", {})
    bare = {"HOME": str(home), "GOOGLE_CLOUD_PROJECT": "p", "GOOGLE_CLOUD_LOCATION": "europe-west4"}
    assert env_api_key("google-vertex", bare) == AUTHENTICATED


# -- precedence and auth.json ----------------------------------------------------------


def test_key_precedence_each_level_beats_the_next(tmp_path: Path) -> None:
    """--api-key > auth.json (api_key, or an oauth login) > environment > models.json's apiKey."""
    models = tmp_path / "models.json"
    models.write_text(json.dumps({"providers": {"openai": {"apiKey": "!echo from-models-json"}}}))
    registry = load_model_registry(models)
    auth = tempi_auth()
    env = {"OPENAI_API_KEY": "from-env"}
    write_auth(auth, {"openai": {"type": "api_key", "key": "from-auth-json"}})
    set_runtime_api_key("openai", "from-flag")
    assert resolve_api_key("openai", registry, env) == "from-flag"
    clear_runtime_api_keys()
    assert resolve_api_key("openai", registry, env) == "from-auth-json"
    auth.unlink()
    assert resolve_api_key("openai", registry, env) == "from-env"
    assert resolve_api_key("openai", registry, {}) == "from-models-json"
    # A login is an auth.json entry too, above the environment.
    write_auth(
        auth,
        {
            "anthropic": {
                "type": "oauth",
                "access": "sk-ant-oat-live",
                "refresh": "r",
                "expires": now_ms() + DAY_MS,
            }
        },
    )
    assert resolve_api_key("anthropic", registry, {"ANTHROPIC_API_KEY": "sk-env"}) == "sk-ant-oat-live"


def test_auth_json_is_pis_where_tempi_has_none_and_tempis_own_otherwise() -> None:
    registry = builtin_registry()
    write_auth(pi_auth(), {"openai": {"type": "api_key", "key": "pis-key"}})
    assert auth_json_path() == pi_auth()
    assert resolve_api_key("openai", registry, {}) == "pis-key"
    assert has_configured_key("openai", registry, {})
    write_auth(tempi_auth(), {"xai": {"type": "api_key", "key": "tempis-key"}})
    assert auth_json_path() == tempi_auth()
    assert resolve_api_key("xai", registry, {}) == "tempis-key"
    # pi's file is no longer read once tempi has its own.
    assert resolve_api_key("openai", registry, {}) is None
    assert not has_configured_key("openai", registry, {})


def test_auth_json_key_is_a_command_an_env_name_or_a_literal() -> None:
    registry = builtin_registry()
    write_auth(
        tempi_auth(),
        {
            "openai": {"type": "api_key", "key": "!printf 'sk-from-%s' command"},
            "groq": {"type": "api_key", "key": "MY_GROQ"},
            "xai": {"type": "api_key", "key": "sk-literal"},
            "mistral": {"type": "api_key", "key": "!echo sk-leaked >&2; exit 5"},
        },
    )
    assert resolve_api_key("openai", registry, {}) == "sk-from-command"
    assert resolve_api_key("groq", registry, {"MY_GROQ": "sk-groq"}) == "sk-groq"
    assert resolve_api_key("xai", registry, {}) == "sk-literal"
    with pytest.raises(ConfigError) as raised:
        resolve_api_key("mistral", registry, {})
    assert f"the key command `echo` in {tempi_auth()} exited with status 5" in str(raised.value)
    assert "sk-leaked" not in str(raised.value)


# -- OAuth refresh ---------------------------------------------------------------------


def test_expired_anthropic_login_is_refreshed_and_written_back(token_urls: ScriptedLLMServer) -> None:
    oauth = token_urls.oauth
    oauth.issue("anthropic", "sk-ant-oat01-new", refresh="rt-2", expires_in=28800, accept_refresh="rt-1")
    auth = write_auth(
        tempi_auth(),
        {
            "anthropic": {
                "type": "oauth",
                "access": "sk-ant-oat01-old",
                "refresh": "rt-1",
                "expires": now_ms() - 1,
            }
        },
    )
    before = now_ms()
    assert resolve_api_key("anthropic", builtin_registry(), {}) == "sk-ant-oat01-new"
    [sent] = oauth.requests_for("anthropic")
    assert sent.method == "POST" and sent.headers["content-type"] == "application/json"
    assert sent.body == {
        "grant_type": "refresh_token",
        "client_id": "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
        "refresh_token": "rt-1",
    }
    entry = json.loads(auth.read_text())["anthropic"]
    assert (entry["type"], entry["access"], entry["refresh"]) == ("oauth", "sk-ant-oat01-new", "rt-2")
    # pi's margin: five minutes before the token really expires.
    assert before + 28800_000 - 300_000 <= entry["expires"] <= now_ms() + 28800_000 - 300_000
    assert stat.S_IMODE(auth.stat().st_mode) == 0o600
    assert not lock_path(auth).exists()
    # Fresh now: the next call needs no refresh.
    assert resolve_api_key("anthropic", builtin_registry(), {}) == "sk-ant-oat01-new"
    assert len(oauth.requests_for("anthropic")) == 1


def test_expired_codex_and_copilot_logins_are_refreshed(token_urls: ScriptedLLMServer) -> None:
    oauth = token_urls.oauth
    new_jwt = codex_jwt("acct-42")
    oauth.issue("openai-codex", new_jwt, refresh="codex-rt-2", expires_in=864000, accept_refresh="codex-rt-1")
    copilot_token = "tid=1;exp=2;proxy-ep=proxy.enterprise.githubcopilot.com;sku=x"
    oauth.issue("github-copilot", copilot_token, expires_in=1800, accept_refresh="gho_github")
    write_auth(
        pi_auth(),
        {
            "openai-codex": {
                "type": "oauth",
                "access": codex_jwt("acct-42"),
                "refresh": "codex-rt-1",
                "expires": 0,
                "accountId": "acct-42",
            },
            "github-copilot": {"type": "oauth", "access": "tid=0", "refresh": "gho_github", "expires": 0},
        },
    )
    registry = builtin_registry()
    assert resolve_api_key("openai-codex", registry, {}) == new_jwt
    [codex] = oauth.requests_for("openai-codex")
    assert codex.headers["content-type"] == "application/x-www-form-urlencoded"
    assert codex.body == {
        "grant_type": "refresh_token",
        "refresh_token": "codex-rt-1",
        "client_id": "app_EMoamEEZ73f0CkXaXp7hrann",
    }
    assert resolve_api_key("github-copilot", registry, {}) == copilot_token
    [copilot] = oauth.requests_for("github-copilot")
    assert copilot.method == "GET" and copilot.headers["authorization"] == "Bearer gho_github"
    assert copilot.headers["copilot-integration-id"] == "vscode-chat"
    entries = json.loads(pi_auth().read_text())
    assert (
        entries["openai-codex"]["accountId"] == "acct-42"
        and entries["openai-codex"]["refresh"] == "codex-rt-2"
    )
    assert entries["github-copilot"]["refresh"] == "gho_github"
    # The Copilot login's token says where its API is, for every Copilot model (pi's modifyModels).
    copilot_models = load_model_registry().models_for("github-copilot")
    assert {m.base_url for m in copilot_models} == {"https://api.enterprise.githubcopilot.com"}


def test_a_failed_refresh_leaves_the_provider_keyless_and_says_to_log_in_again(
    token_urls: ScriptedLLMServer,
) -> None:
    token_urls.oauth.issue("anthropic", "never", accept_refresh="some-other-refresh-token")
    write_auth(
        tempi_auth(),
        {
            "anthropic": {
                "type": "oauth",
                "access": "sk-ant-oat01-expired",
                "refresh": "rt-revoked",
                "expires": 1,
            }
        },
    )
    with pytest.raises(ConfigError) as raised:
        resolve_api_key("anthropic", builtin_registry(), {"ANTHROPIC_API_KEY": "sk-env-is-not-used"})
    message = str(raised.value)
    assert "Log in again with /login" in message and str(tempi_auth()) in message and "HTTP 400" in message
    assert "rt-revoked" not in message and "sk-ant-oat01-expired" not in message
    # The login stays in the file, for a retry or a new /login.
    assert read_auth()["anthropic"]["refresh"] == "rt-revoked"


def test_logout_removes_the_entry_for_pi_too() -> None:
    write_auth(
        pi_auth(),
        {
            "anthropic": {"type": "oauth", "access": "sk-ant-oat-x", "refresh": "r", "expires": 1},
            "openai": {"type": "api_key", "key": "sk-openai-secret"},
        },
    )
    listed = logout_text("")[0]
    assert "anthropic (login), openai (API key)" in listed
    assert "sk-openai-secret" not in listed and "sk-ant-oat-x" not in listed
    text, _ = logout_text("anthropic")
    assert "Logged out of anthropic" in text
    assert list(json.loads(pi_auth().read_text())) == ["openai"]
    assert "No login or key for anthropic" in logout_text("anthropic")[0]


# -- the lock, shared with pi's proper-lockfile -----------------------------------------


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    target = write_auth(tmp_path / "auth.json", {})
    stale = lock_path(target)
    stale.mkdir()
    os.utime(stale, (time.time() - 60, time.time() - 60))
    with locked(target):
        assert stale.is_dir()
    assert not stale.exists()


@pytest.fixture
def mkdir_attempts() -> Iterator[list[str]]:
    """Every os.mkdir this process attempts, to know when a thread has met a held lock."""
    seen: list[str] = []
    active = [True]

    def hook(event: str, args: tuple[object, ...]) -> None:
        if active[0] and event == "os.mkdir":
            seen.append(os.fsdecode(args[0]))  # type: ignore[arg-type]

    sys.addaudithook(hook)
    yield seen
    active[0] = False


def test_tempi_waits_while_pi_holds_the_lock_and_uses_pis_refresh(
    token_urls: ScriptedLLMServer, node_lockfile: NodeLockfile, mkdir_attempts: list[str]
) -> None:
    """proper-lockfile (pi's library, run by node) holds auth.json's lock, as pi does while it
    refreshes; tempi, finding the login expired, waits, then reads what pi wrote instead of
    refreshing again (its token endpoint, which knows no refresh, is never asked)."""
    auth = write_auth(
        pi_auth(),
        {"anthropic": {"type": "oauth", "access": "sk-ant-oat01-old", "refresh": "rt-1", "expires": 1}},
    )
    holder = node_lockfile.hold(auth)
    result: list[object] = []
    worker = threading.Thread(
        target=lambda: result.append(resolve_api_key("anthropic", builtin_registry(), {}))
    )
    worker.start()
    deadline = time.monotonic() + 30
    while str(lock_path(auth)) not in mkdir_attempts:
        assert time.monotonic() < deadline, "tempi never tried the lock"
        time.sleep(0.01)
    assert worker.is_alive() and result == []
    pis = {"type": "oauth", "access": "sk-ant-oat01-from-pi", "refresh": "rt-2", "expires": now_ms() + DAY_MS}
    holder.write_and_release({"anthropic": pis})
    worker.join(60)
    assert result == ["sk-ant-oat01-from-pi"]
    assert token_urls.oauth.requests_for("anthropic") == []


def test_pis_lockfile_waits_while_tempi_holds_the_lock(tmp_path: Path, node_lockfile: NodeLockfile) -> None:
    target = write_auth(tmp_path / "auth.json", {})
    with locked(target):
        waiter = node_lockfile.wait(target)
        assert waiter.saw_it_held()
        released_ms = now_ms()
    acquired_ms = waiter.acquired_ms()
    assert acquired_ms >= released_ms
