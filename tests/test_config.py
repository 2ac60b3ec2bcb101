"""Config files and values: paths, models.json, settings.json, API keys and headers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tempi.agent.model_registry import builtin_registry
from tempi.config.api_keys import (
    clear_command_cache,
    has_configured_key,
    resolve_api_key,
    resolve_config_value,
    resolve_request_headers,
)
from tempi.config.errors import ConfigError
from tempi.config.models_json import load_model_registry, strip_json_comments
from tempi.config.paths import models_json_path, tempi_home
from tempi.config.settings import Settings, load_settings


@pytest.fixture(autouse=True)
def fresh_command_cache() -> None:
    clear_command_cache()


# --- paths -----------------------------------------------------------------------------


def test_tempi_home_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TEMPI_HOME", str(tmp_path))
    assert tempi_home() == tmp_path
    assert models_json_path() == tmp_path / "models.json"
    monkeypatch.delenv("TEMPI_HOME")
    assert tempi_home() == Path.home() / ".tempi"


# --- models.json -----------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_missing_models_json_gives_builtins(tmp_path: Path) -> None:
    registry = load_model_registry(tmp_path / "models.json")
    assert registry.find("anthropic", "claude-sonnet-4-5") is not None


def test_pi_models_json_with_comments_and_trailing_commas(tmp_path: Path) -> None:
    path = write(
        tmp_path / "models.json",
        """{
          // local models
          "providers": {
            "ollama": {
              "baseUrl": "http://localhost:11434/v1", // the default port
              "api": "openai-completions",
              "apiKey": "ollama",
              "models": [{"id": "llama3.1:8b", "name": "see http://x//y",},],
            },
          },
        }""",
    )
    registry = load_model_registry(path)
    model = registry.find("ollama", "llama3.1:8b")
    assert model is not None
    assert model.name == "see http://x//y"


def test_strip_json_comments_leaves_strings_alone() -> None:
    text = '{"a": "// not a comment, ]", "b": [1, 2,], } // end'
    assert json.loads(strip_json_comments(text)) == {"a": "// not a comment, ]", "b": [1, 2]}


def test_models_json_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "models.json", '{"providers": {\n  "x": nope\n}}')
    with pytest.raises(ConfigError, match=rf"{path}.*line 2"):
        load_model_registry(path)


def test_models_json_schema_error_names_the_field(tmp_path: Path) -> None:
    path = write(tmp_path / "models.json", json.dumps({"providers": {"x": {"models": [{"name": "no id"}]}}}))
    with pytest.raises(ConfigError, match=r"providers\.x\.models\.0\.id"):
        load_model_registry(path)
    path.write_text(json.dumps({"providers": {"x": {"models": [{"id": "m", "contextWindow": "big"}]}}}))
    with pytest.raises(ConfigError, match=r"contextWindow"):
        load_model_registry(path)


def test_models_json_rule_error_names_file_and_provider(tmp_path: Path) -> None:
    path = write(tmp_path / "models.json", json.dumps({"providers": {"mine": {"models": [{"id": "m"}]}}}))
    with pytest.raises(ConfigError, match=rf'{path}.*provider "mine"'):
        load_model_registry(path)


def test_models_json_must_be_an_object(tmp_path: Path) -> None:
    path = write(tmp_path / "models.json", "[]")
    with pytest.raises(ConfigError, match="JSON object"):
        load_model_registry(path)


# --- settings.json ---------------------------------------------------------------------


def test_settings_defaults_are_pis() -> None:
    settings = Settings()
    assert settings.steering_mode == settings.follow_up_mode == "one-at-a-time"
    assert (
        settings.compaction.enabled,
        settings.compaction.reserve_tokens,
        settings.compaction.keep_recent_tokens,
    ) == (
        True,
        16_384,
        20_000,
    )
    assert (settings.retry.enabled, settings.retry.max_retries, settings.retry.base_delay_ms) == (
        True,
        3,
        2_000,
    )
    assert settings.retry.max_delay_ms == 60_000


def test_project_settings_win_and_nested_objects_merge(tmp_path: Path) -> None:
    global_path = write(
        tmp_path / "home" / "settings.json",
        json.dumps(
            {
                "defaultModel": "gpt-5",
                "theme": "dark",
                "compaction": {"enabled": False, "reserveTokens": 1000},
            }
        ),
    )
    project = tmp_path / "project"
    write(
        project / ".tempi" / "settings.json",
        json.dumps({"defaultModel": "o3", "compaction": {"reserveTokens": 8192}, "steeringMode": "all"}),
    )
    settings = load_settings(project, global_path=global_path)
    assert settings.default_model == "o3"
    assert settings.steering_mode == "all"
    assert settings.compaction.enabled is False
    assert settings.compaction.reserve_tokens == 8192
    assert settings.compaction.keep_recent_tokens == 20_000
    # Keys tempi does not use survive.
    assert settings.to_json_dict()["theme"] == "dark"


def test_old_queue_mode_key_is_read_as_steering_mode(tmp_path: Path) -> None:
    global_path = write(tmp_path / "settings.json", json.dumps({"queueMode": "all"}))
    assert load_settings(tmp_path / "nowhere", global_path=global_path).steering_mode == "all"


def test_no_settings_files_give_defaults(tmp_path: Path) -> None:
    assert load_settings(tmp_path, global_path=tmp_path / "missing.json") == Settings()


def test_malformed_settings_name_the_file(tmp_path: Path) -> None:
    project = tmp_path / "project"
    bad = write(project / ".tempi" / "settings.json", "{not json")
    with pytest.raises(ConfigError, match=str(bad)):
        load_settings(project, global_path=tmp_path / "missing.json")
    bad.write_text(json.dumps({"steeringMode": "sometimes"}))
    with pytest.raises(ConfigError, match=rf"{bad}(.|\n)*steeringMode"):
        load_settings(project, global_path=tmp_path / "missing.json")


def test_session_dir_setting_expands_home_and_relative_paths(tmp_path: Path) -> None:
    assert Settings(session_dir="~/s").session_dir_path(tmp_path) == Path.home() / "s"
    assert Settings(session_dir="rel/s").session_dir_path(tmp_path) == tmp_path / "rel/s"
    assert Settings().session_dir_path(tmp_path) is None


# --- API keys and headers --------------------------------------------------------------


def test_value_resolution_env_literal_and_command() -> None:
    env = {"MY_KEY": "from-env"}
    assert resolve_config_value("MY_KEY", "key", env) == "from-env"
    assert resolve_config_value("sk-literal", "key", env) == "sk-literal"
    assert resolve_config_value("!printf '  from-command \\n'", "key", env) == "from-command"


def test_command_runs_once_per_process(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    command = f"!echo x >> {counter}; echo key"
    assert resolve_config_value(command, "key") == "key"
    assert resolve_config_value(command, "key") == "key"
    assert counter.read_text().count("x") == 1


def test_failing_command_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match=r'API key for provider "p".*exited with status 3'):
        resolve_config_value("!echo 'it went wrong' >&2; exit 3", 'API key for provider "p"')
    with pytest.raises(ConfigError, match="printed nothing"):
        resolve_config_value("!true", "key")


def test_a_failing_key_command_never_repeats_its_output_or_arguments() -> None:
    """Issue 42: the error of a failing `!command` travels into the session file, the
    workflow history and the log, so it keeps only the command's first word and its exit
    status, never what it printed (a vault's error can quote the secret) or its arguments."""
    command = "!VAULT_TOKEN=tok-in-args vault read -field=key secret/ai; echo sk-leaked-out; echo sk-leaked-err >&2; exit 3"
    with pytest.raises(ConfigError) as raised:
        resolve_config_value(command, 'API key for provider "p"')
    message = str(raised.value)
    assert (
        "the apiKey command `vault` in models.json exited with status 3; run it yourself to see why"
        in message
    )
    for secret in ("sk-leaked-out", "sk-leaked-err", "tok-in-args", "secret/ai"):
        assert secret not in message
    with pytest.raises(ConfigError) as raised:
        resolve_config_value(
            "!echo sk-leaked-err >&2; exit 4", 'header "X" of provider "p"', setting="header"
        )
    assert "the header command `echo` in models.json exited with status 4" in str(raised.value)
    assert "sk-leaked-err" not in str(raised.value)


def test_default_environment_variables() -> None:
    registry = builtin_registry()
    env = {"ANTHROPIC_API_KEY": "a-key"}
    assert resolve_api_key("anthropic", registry, env) == "a-key"
    assert resolve_api_key("openai", registry, env) is None
    assert has_configured_key("anthropic", registry, env)
    assert not has_configured_key("openai", registry, env)


@pytest.mark.parametrize(
    ("provider", "variable"),
    [
        ("openrouter", "OPENROUTER_API_KEY"),
        ("moonshotai-cn", "MOONSHOT_API_KEY"),
        ("kimi-coding", "KIMI_API_KEY"),
        ("minimax-cn", "MINIMAX_CN_API_KEY"),
        ("opencode-go", "OPENCODE_API_KEY"),
        ("xiaomi-token-plan-sgp", "XIAOMI_TOKEN_PLAN_SGP_API_KEY"),
    ],
)
def test_pis_key_variables_reach_its_providers(provider: str, variable: str) -> None:
    """A pi user's exported key works unchanged for each provider of pi's catalog tempi can call."""
    registry = builtin_registry()
    assert provider in registry.providers() and registry.models_for(provider)
    assert resolve_api_key(provider, registry, {variable: "k-1"}) == "k-1"
    assert has_configured_key(provider, registry, {variable: "k-1"})
    assert not has_configured_key(provider, registry, {})


def test_environment_wins_over_models_json_api_key(tmp_path: Path) -> None:
    """pi's order: the provider's variable before models.json's apiKey, which is the fallback."""
    path = write(
        tmp_path / "models.json", json.dumps({"providers": {"openai": {"apiKey": "!echo from-config"}}})
    )
    registry = load_model_registry(path)
    env = {"OPENAI_API_KEY": "from-env"}
    assert has_configured_key("openai", registry, env)
    assert resolve_api_key("openai", registry, env) == "from-env"
    assert resolve_api_key("openai", registry, {}) == "from-config"


def test_request_headers_resolve_and_add_bearer_auth(tmp_path: Path) -> None:
    path = write(
        tmp_path / "models.json",
        json.dumps(
            {
                "providers": {
                    "proxy": {
                        "baseUrl": "https://p.example.com/v1",
                        "api": "openai-completions",
                        "apiKey": "PROXY_KEY",
                        "authHeader": True,
                        "headers": {"x-team": "TEAM", "x-fixed": "literal"},
                        "models": [{"id": "m", "headers": {"x-model": "!echo per-model"}}],
                    }
                }
            }
        ),
    )
    registry = load_model_registry(path)
    model = registry.find("proxy", "m")
    assert model is not None
    env = {"PROXY_KEY": "secret", "TEAM": "blue"}
    api_key = resolve_api_key("proxy", registry, env)
    assert api_key == "secret"
    assert resolve_request_headers(model, registry, api_key, env) == {
        "x-team": "blue",
        "x-fixed": "literal",
        "x-model": "per-model",
        "Authorization": "Bearer secret",
    }
    with pytest.raises(ConfigError, match="authHeader"):
        resolve_request_headers(model, registry, None, env)
