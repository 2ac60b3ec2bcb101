"""The spec's small value types (durations, model and sandbox references, names), each with
an error message that says what to write instead."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from tempi.agent.model_spec import THINKING_LEVELS

_DURATION_PART = re.compile(r"(\d+)([smhd])")
_DURATION = re.compile(r"^(?:\d+[smhd])+$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DURATION_PATTERN = r"^(?:[0-9]+[smhd])+$"


def _positive_int(value: Any) -> int:
    # YAML gives ints; a bool is an int to Python but never what the user meant.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PydanticCustomError(
            "positive_int", "must be a positive integer, e.g. 40 (got {got})", {"got": repr(value)}
        )
    return value


def _non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PydanticCustomError(
            "non_negative_int", "must be 0 or a positive integer, e.g. 2 (got {got})", {"got": repr(value)}
        )
    return value


def _positive_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise PydanticCustomError(
            "positive_number", "must be a positive number, e.g. 50 (got {got})", {"got": repr(value)}
        )
    return float(value)


def parse_duration(value: Any) -> int:
    """`90s`, `10m`, `6h`, `1d`, `1h30m`, or a whole number of seconds; returns seconds."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and _DURATION.match(value.strip()):
        seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(value.strip()))
        if seconds > 0:
            return seconds
    raise PydanticCustomError(
        "duration",
        "must be a duration such as 90s, 10m, 6h or 1h30m (got {got})",
        {"got": repr(value)},
    )


def format_duration(seconds: int) -> str:
    parts = []
    for unit in ("d", "h", "m", "s"):
        n, seconds = divmod(seconds, _UNIT_SECONDS[unit])
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts) or "0s"


def split_model_ref(ref: str) -> tuple[str, str, str | None]:
    """`provider/id[:thinking]` as (provider, id, level). A suffix that is not a thinking
    level stays part of the id, as ids such as `llama3:8b` contain colons."""
    provider, _, rest = ref.partition("/")
    head, colon, suffix = rest.rpartition(":")
    if colon and suffix in THINKING_LEVELS:
        return provider, head, suffix
    return provider, rest, None


def _model_ref(value: Any) -> str:
    if isinstance(value, str) and "/" in value and not any(c.isspace() for c in value):
        provider, model_id, _ = split_model_ref(value)
        if provider and model_id:
            return value
    levels = "|".join(THINKING_LEVELS)
    raise PydanticCustomError(
        "model_ref",
        "must be provider/id with an optional :thinking level ({levels}), "
        "e.g. anthropic/claude-sonnet-4-5:medium (got {got})",
        {"levels": levels, "got": repr(value)},
    )


def _sandbox_ref(value: Any) -> str:
    if isinstance(value, str):
        kind, colon, image = value.partition(":")
        if kind in ("local", "bwrap") and not colon:
            return value
        if kind == "docker" and (not colon or (image and not any(c.isspace() for c in image))):
            return value
    raise PydanticCustomError(
        "sandbox_ref",
        "must be local, bwrap, docker or docker:IMAGE (got {got})",
        {"got": repr(value)},
    )


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def _name(value: Any) -> str:
    if isinstance(value, str) and _NAME.match(value):
        return value
    raise PydanticCustomError(
        "name",
        "must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit, "
        "e.g. migrate-old-api (got {got})",
        {"got": repr(value)},
    )


_BAD_REF_PARTS = ("..", "@{", "//", "/.", ".lock/")


def _branch(value: Any) -> str:
    # git's own rules (check-ref-format) in brief: the branch is made much later, so a bad
    # name is said now, not after hours of shards.
    if (
        isinstance(value, str)
        and value
        and re.fullmatch(r"[A-Za-z0-9._/+-]+", value)
        and not any(p in value for p in _BAD_REF_PARTS)
        and not value.startswith(("/", ".", "-"))
        and not value.endswith(("/", ".", ".lock"))
    ):
        return value
    raise PydanticCustomError(
        "branch",
        "must be a git branch name such as tempi/migrate-old-api (got {got})",
        {"got": repr(value)},
    )


def _text(value: Any) -> str:
    if isinstance(value, str) and value.strip():
        return value
    raise PydanticCustomError("text", "must be a non-empty string (got {got})", {"got": repr(value)})


PositiveInt = Annotated[int, PlainValidator(_positive_int), WithJsonSchema({"type": "integer", "minimum": 1})]
NonNegativeInt = Annotated[
    int, PlainValidator(_non_negative_int), WithJsonSchema({"type": "integer", "minimum": 0})
]
PositiveNumber = Annotated[
    float, PlainValidator(_positive_number), WithJsonSchema({"type": "number", "exclusiveMinimum": 0})
]
Duration = Annotated[
    int,
    PlainValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": DURATION_PATTERN},
                {"type": "integer", "minimum": 1},
            ],
            "description": "90s, 10m, 6h, 1h30m, or whole seconds",
        }
    ),
]
ModelRef = Annotated[
    str,
    PlainValidator(_model_ref),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^[^/\s]+/\S+$",
            "description": "provider/id[:thinking], e.g. anthropic/claude-sonnet-4-5:medium",
        }
    ),
]
SandboxRef = Annotated[
    str,
    PlainValidator(_sandbox_ref),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^(local|bwrap|docker(:\S+)?)$",
            "description": "local | bwrap | docker[:IMAGE]",
        }
    ),
]
Name = Annotated[
    str,
    PlainValidator(_name),
    WithJsonSchema({"type": "string", "pattern": _NAME.pattern}),
]
BranchName = Annotated[
    str,
    PlainValidator(_branch),
    WithJsonSchema({"type": "string", "pattern": r"^[A-Za-z0-9._/+-]+$"}),
]
Text = Annotated[str, PlainValidator(_text), WithJsonSchema({"type": "string", "minLength": 1})]
