"""Reading models.json (pi's format) into a model registry.

`~/.pi/agent/models.json` works unchanged when copied to `$TEMPI_HOME/models.json`,
including pi's leniencies: `//` line comments and trailing commas.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from tempi.agent.model_registry import ModelRegistry, ModelsConfig, ModelsConfigError, build_registry
from tempi.config.errors import ConfigError, describe_validation_error, read_json_object, read_text
from tempi.config.paths import models_json_path

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


def load_model_registry(path: Path | None = None) -> ModelRegistry:
    """Built-in models merged with `path` (default `$TEMPI_HOME/models.json`)."""
    path = path or models_json_path()
    config = read_models_config(path)
    try:
        return build_registry(config)
    except ModelsConfigError as exc:
        raise ConfigError(f"Invalid models file {path}: {exc}") from None
