"""Checking tool-call arguments against the tool's JSON schema before running it.

Covers the schema features the tool specs use (object, array, string, number, boolean,
required). Like pi, it coerces what models commonly get almost right: numbers and
booleans sent as strings. Optional fields sent as null count as absent.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tempi.activities.tools.errors import ToolError
from tempi.agent.llm_context import ToolSpec

_TYPE_NAMES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _number(value: Any) -> int | float | None:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return int(value) if float(value).is_integer() else value


def _check(schema: dict[str, Any], value: Any, where: str, problems: list[str]) -> Any:
    kind = schema.get("type")
    label = where or "arguments"
    if kind == "object":
        if not isinstance(value, dict):
            problems.append(f"{label}: must be an object, got {_describe(value)}")
            return value
        result = {key: item for key, item in value.items() if item is not None}
        prefix = f"{where}." if where else ""
        for key in schema.get("required", []):
            if key not in result:
                problems.append(f"{prefix}{key}: required but missing")
        for key, sub_schema in schema.get("properties", {}).items():
            if key in result:
                result[key] = _check(sub_schema, result[key], f"{prefix}{key}", problems)
        return result
    if kind == "array":
        if not isinstance(value, list):
            problems.append(f"{label}: must be an array, got {_describe(value)}")
            return value
        items = schema.get("items", {})
        return [_check(items, item, f"{where}[{index}]", problems) for index, item in enumerate(value)]
    if kind == "string":
        if not isinstance(value, str):
            problems.append(f"{label}: must be a string, got {_describe(value)}")
        return value
    if kind == "number":
        number = _number(value)
        if number is None:
            problems.append(f"{label}: must be a number, got {_describe(value)}")
            return value
        return number
    if kind == "boolean":
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        if not isinstance(value, bool):
            problems.append(f"{label}: must be true or false, got {_describe(value)}")
        return value
    return value


def validate_args(spec: ToolSpec, args: Any) -> dict[str, Any]:
    """The arguments with coercions applied; raises ToolError listing every problem."""
    problems: list[str] = []
    checked = _check(spec.parameters, args, "", problems)
    if problems:
        raise ToolError(invalid_args_message(spec.name, problems, args))
    return checked


def invalid_args_message(tool: str, problems: list[str], args: Any) -> str:
    listed = "\n".join(f"  - {problem}" for problem in problems)
    try:
        received = json.dumps(args, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        received = repr(args)
    return f'Invalid arguments for tool "{tool}":\n{listed}\n\nArguments received:\n{received}'


def whole_number(value: int | float, field: str, tool: str, args: Any, minimum: int | None = None) -> int:
    """A schema-checked number that must also be a whole number (line counts, limits)."""
    if isinstance(value, float):
        raise ToolError(invalid_args_message(tool, [f"{field}: must be a whole number, got {value}"], args))
    if minimum is not None and value < minimum:
        raise ToolError(
            invalid_args_message(tool, [f"{field}: must be at least {minimum}, got {value}"], args)
        )
    return value
