"""The error type configuration problems are reported with, and its wording helpers."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError


class ConfigError(Exception):
    """A configuration file or value is unusable; the message says which and why."""


def describe_validation_error(error: ValidationError) -> str:
    """One line per problem, each naming the JSON path: `providers.x.models.0.id: Field required`."""
    lines = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "(top level)"
        lines.append(f"  {where}: {problem['msg']}")
    return "\n".join(lines)


def read_json_object(path: Path, text: str, what: str) -> dict[str, object]:
    """Parse `text` (the content of `path`) as a JSON object or raise a ConfigError naming the file."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{what} {path} is not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {path} must hold a JSON object, found {type(data).__name__}")
    return data


def read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read {what} {path}: {exc}") from None
