"""Turning configured apiKey and header values into real ones.

Runs only in worker and CLI processes, never in workflow code: it reads the environment
and may run shell commands. A value is resolved as pi does:

- `!command`: run it with the shell and use its trimmed stdout (once per process); a
  failure names only the command's first word and exit status, never its output;
- the name of a set environment variable: that variable's value;
- anything else: the value itself.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import threading
from collections.abc import Mapping

from tempi.agent.model_registry import ModelRegistry
from tempi.agent.model_spec import ModelSpec
from tempi.config.errors import ConfigError

# Where a provider's key is looked for when models.json configures none.
DEFAULT_API_KEY_ENV: dict[str, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "google": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "cerebras": "CEREBRAS_API_KEY",
    "xai": "XAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "zai": "ZAI_API_KEY",
    "huggingface": "HF_TOKEN",
    "moonshotai": "MOONSHOT_API_KEY",
    "fireworks": "FIREWORKS_API_KEY",
    "vercel-ai-gateway": "AI_GATEWAY_API_KEY",
    # pi 0.73.1's env-api-keys.js for the rest of its providers whose API tempi speaks
    # (several providers share one variable, as in pi).
    "moonshotai-cn": "MOONSHOT_API_KEY",
    "kimi-coding": "KIMI_API_KEY",
    "minimax": "MINIMAX_API_KEY",
    "minimax-cn": "MINIMAX_CN_API_KEY",
    "opencode": "OPENCODE_API_KEY",
    "opencode-go": "OPENCODE_API_KEY",
    "xiaomi": "XIAOMI_API_KEY",
    "xiaomi-token-plan-ams": "XIAOMI_TOKEN_PLAN_AMS_API_KEY",
    "xiaomi-token-plan-cn": "XIAOMI_TOKEN_PLAN_CN_API_KEY",
    "xiaomi-token-plan-sgp": "XIAOMI_TOKEN_PLAN_SGP_API_KEY",
    "azure-openai-responses": "AZURE_OPENAI_API_KEY",
}

COMMAND_TIMEOUT_SECONDS = 10

_command_results: dict[str, str] = {}
_command_lock = threading.Lock()


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _command_name(command: str) -> str:
    """The program a shell command runs: its first word after any `NAME=value` assignments.

    Errors name only this: the arguments and the assignments may hold a token, and a failing
    command's output may quote the secret it was asked for. Errors travel into the session
    file, the workflow history and the log."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for word in words:
        if not _ASSIGNMENT.match(word):
            return word.split(";")[0].split("|")[0].split("&")[0] or "?"
    return "?"


def _run_command(command: str, description: str, setting: str) -> str:
    with _command_lock:
        cached = _command_results.get(command)
    if cached is not None:
        return cached
    what = f"the {setting} command `{_command_name(command)}` in models.json"
    try:
        completed = subprocess.run(
            command,
            shell=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"Could not get {description}: {what} did not finish within {COMMAND_TIMEOUT_SECONDS} s;"
            " run it yourself to see why"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"Could not get {description}: {what} could not start ({exc.strerror or type(exc).__name__})"
        ) from None
    if completed.returncode != 0:
        # Never the command's output: it may quote the very secret it was asked for.
        raise ConfigError(
            f"Could not get {description}: {what} exited with status {completed.returncode};"
            " run it yourself to see why"
        )
    value = completed.stdout.strip()
    if not value:
        raise ConfigError(f"Could not get {description}: {what} printed nothing")
    with _command_lock:
        _command_results[command] = value
    return value


def clear_command_cache() -> None:
    """Forget command results, so the next resolution runs the commands again."""
    with _command_lock:
        _command_results.clear()


def resolve_config_value(
    value: str, description: str, env: Mapping[str, str] | None = None, *, setting: str = "apiKey"
) -> str:
    """`description` names the value in errors, e.g. 'API key for provider "openai"';
    `setting` is the models.json key it came from ("apiKey", "header")."""
    if value.startswith("!"):
        return _run_command(value[1:], description, setting)
    environment = os.environ if env is None else env
    return environment.get(value) or value


def resolve_api_key(
    provider: str, registry: ModelRegistry, env: Mapping[str, str] | None = None
) -> str | None:
    """The key to call `provider` with: models.json's apiKey if set, else the provider's
    usual environment variable, else None."""
    config = registry.request_config(provider)
    if config is not None and config.api_key:
        return resolve_config_value(config.api_key, f'API key for provider "{provider}"', env)
    variable = DEFAULT_API_KEY_ENV.get(provider)
    environment = os.environ if env is None else env
    return (environment.get(variable) or None) if variable else None


def has_configured_key(provider: str, registry: ModelRegistry, env: Mapping[str, str] | None = None) -> bool:
    """Whether a key is configured, without running any command (for choosing a default)."""
    config = registry.request_config(provider)
    if config is not None and config.api_key:
        return True
    variable = DEFAULT_API_KEY_ENV.get(provider)
    environment = os.environ if env is None else env
    return bool(variable and environment.get(variable))


def resolve_request_headers(
    model: ModelSpec,
    registry: ModelRegistry,
    api_key: str | None,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Extra HTTP headers for a call to `model`: the model's own, the provider's, the
    per-model ones from models.json (later wins), and `Authorization: Bearer` when the
    provider sets `authHeader`."""
    headers = dict(model.headers or {})
    config = registry.request_config(model.provider)
    if config is not None and config.headers:
        for name, value in config.headers.items():
            headers[name] = resolve_config_value(
                value, f'header "{name}" of provider "{model.provider}"', env, setting="header"
            )
    for name, value in (registry.header_config_for(model) or {}).items():
        headers[name] = resolve_config_value(
            value, f'header "{name}" of model "{model.provider}/{model.id}"', env, setting="header"
        )
    if config is not None and config.auth_header:
        if not api_key:
            raise ConfigError(
                f'Provider "{model.provider}" sets "authHeader" but no API key was found for it'
            )
        headers["Authorization"] = f"Bearer {api_key}"
    return headers
