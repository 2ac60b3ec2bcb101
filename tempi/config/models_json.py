"""Reading models.json (pi's format) into a model registry.

`~/.pi/agent/models.json` works unchanged when copied to `$TEMPI_HOME/models.json`,
including pi's leniencies: `//` line comments and trailing commas.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from tempi.agent.model_registry import ModelRegistry, build_registry
from tempi.agent.models_config import ModelsConfig, ModelsConfigError
from tempi.config.auth_json import auth_json_path, read_auth
from tempi.config.errors import ConfigError, describe_validation_error, read_json_object, read_text
from tempi.config.oauth_refresh import copilot_base_url
from tempi.config.paths import models_json_path

COPILOT = "github-copilot"

_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*')
_STRING_OR_TRAILING_COMMA = re.compile(r'"(?:\\.|[^"\\])*"|,(\s*[}\]])')


def strip_json_comments(text: str) -> str:
    """Drop `//` comments and trailing commas, leaving string literals alone."""
    text = _STRING_OR_COMMENT.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text)
    return _STRING_OR_TRAILING_COMMA.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(0), text)


def read_models_config(path: Path) -> ModelsConfig | None:
    """The parsed file, or None when it does not exist."""
    if not path.exists():
        return None
    data = read_json_object(path, strip_json_comments(read_text(path, "models file")), "models file")
    try:
        return ModelsConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"Invalid models file {path}:\n{describe_validation_error(exc)}") from None


def _stamp(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return None


def registry_stamp(path: Path) -> tuple[float | None, float | None]:
    """Changes when the registry read from models.json `path` may change: that file or auth.json."""
    return _stamp(path), _stamp(auth_json_path())


def with_login_base_urls(registry: ModelRegistry, auth_path: Path | None = None) -> ModelRegistry:
    """A GitHub Copilot login decides where its models are (pi's `modifyModels`): the host
    its token names, over the built-in and models.json URLs. Only the host is used here;
    the token stays in auth.json."""
    try:
        login = read_auth(auth_path).get(COPILOT)
    except ConfigError:
        return registry  # said when a key is needed
    if not isinstance(login, dict) or login.get("type") != "oauth":
        return registry
    base_url = copilot_base_url(login)
    registry.models = [
        m.model_copy(update={"base_url": base_url}) if m.provider == COPILOT else m for m in registry.models
    ]
    return registry


def load_model_registry(path: Path | None = None) -> ModelRegistry:
    """Built-in models merged with `path` (default `$TEMPI_HOME/models.json`), and the base
    URL a Copilot login gives."""
    path = path or models_json_path()
    config = read_models_config(path)
    try:
        return with_login_base_urls(build_registry(config))
    except ModelsConfigError as exc:
        raise ConfigError(f"Invalid models file {path}: {exc}") from None
