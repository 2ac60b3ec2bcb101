"""Where a provider's key comes from, and turning configured values into real ones.

Runs only in worker and CLI processes, never in workflow code: it reads the environment and
auth.json, and may run shell commands or refresh a login. The key is, in pi's order: `--api-key`
(this process only), auth.json's entry (`api_key`, or `oauth` refreshed when expired), the
provider's environment variables (env_api_keys.py), then models.json's apiKey.

A configured value (auth.json `key`, models.json `apiKey` and headers) is resolved as pi does:

- `!command`: run it with the shell and use its trimmed stdout (once per process); a
  failure names only the command's first word and exit status, never its output;
- the name of a set environment variable: that variable's value;
- anything else: the value itself.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path

from tempi.agent.model_registry import ModelRegistry
from tempi.agent.model_spec import ModelSpec
from tempi.config.auth_json import auth_json_path, read_auth
from tempi.config.env_api_keys import env_api_key
from tempi.config.errors import ConfigError
from tempi.config.oauth_refresh import oauth_api_key
from tempi.config.secret_files import secret_value

COMMAND_TIMEOUT_SECONDS = 10

_command_results: dict[str, str] = {}
_command_lock = threading.Lock()


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
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


def _run_command(command: str, description: str, setting: str, source: str) -> str:
    with _command_lock:
        cached = _command_results.get(command)
    if cached is not None:
        return cached
    what = f"the {setting} command `{_command_name(command)}` in {source}"
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
    value: str,
    description: str,
    env: Mapping[str, str] | None = None,
    *,
    setting: str = "apiKey",
    source: str = "models.json",
) -> str:
    """`description` names the value in errors, e.g. 'API key for provider "openai"';
    `setting` is the key it came from ("apiKey", "header", "key") in the file `source`."""
    if value.startswith("!"):
        return _run_command(value[1:], description, setting, source)
    # A variable's name (or NAME_FILE's file); anything else is the value itself.
    found = secret_value(value, env) if _VARIABLE_NAME.fullmatch(value) else None
    return found or value


_runtime_keys: dict[str, str] = {}


def set_runtime_api_key(provider: str, key: str) -> None:
    """`--api-key`: the key for `provider` in this process, above every other source. Kept in
    memory, never in the environment, so tools and other workers never see it."""
    _runtime_keys[provider] = key


def clear_runtime_api_keys() -> None:
    _runtime_keys.clear()


def _models_json_key(provider: str, registry: ModelRegistry, env: Mapping[str, str] | None) -> str | None:
    config = registry.request_config(provider)
    if config is None or not config.api_key:
        return None
    return resolve_config_value(config.api_key, f'API key for provider "{provider}"', env)


def resolve_api_key(
    provider: str,
    registry: ModelRegistry,
    env: Mapping[str, str] | None = None,
    auth_path: Path | None = None,
) -> str | None:
    """The key to call `provider` with, in pi's order (see the module's note), else None."""
    if runtime := _runtime_keys.get(provider):
        return runtime
    path = auth_path or auth_json_path()
    entry = read_auth(path).get(provider)
    if isinstance(entry, dict) and entry.get("type") == "api_key" and isinstance(entry.get("key"), str):
        return resolve_config_value(
            entry["key"], f'API key for provider "{provider}"', env, setting="key", source=str(path)
        )
    if isinstance(entry, dict) and entry.get("type") == "oauth":
        try:
            # A login pi knows no flow for gives no key, and (as in pi) no environment key either.
            key = oauth_api_key(provider, entry, path)
        except ConfigError:
            # pi falls back to models.json's apiKey when a refresh fails; without one, say why.
            key = _models_json_key(provider, registry, env)
            if key is None:
                raise
        return key if key is not None else _models_json_key(provider, registry, env)
    return env_api_key(provider, env) or _models_json_key(provider, registry, env)


def has_configured_key(
    provider: str,
    registry: ModelRegistry,
    env: Mapping[str, str] | None = None,
    auth_path: Path | None = None,
) -> bool:
    """Whether `provider` has a key from any source, without running a command or refreshing
    a login (for choosing a default model and listing the available ones)."""
    if provider in _runtime_keys:
        return True
    try:
        if read_auth(auth_path).get(provider):
            return True
    except ConfigError:
        pass  # a broken auth.json is reported when a key is needed
    if env_api_key(provider, env):
        return True
    config = registry.request_config(provider)
    return config is not None and bool(config.api_key)


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
