"""Reading a spec file, with errors that name the file, the key and what to write instead."""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from tempi.pipeline.spec import PipelineSpec


class SpecError(Exception):
    """A spec that cannot run; `problems` are lines of `FILE: KEY: what to do`."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def load_spec(path: Path) -> PipelineSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([f"{path}: no such file; give the path of a pipeline spec (YAML)"]) from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError([f"{path}: cannot read it ({err})"]) from None
    return parse_spec(text, str(path))


def parse_spec(text: str, source: str) -> PipelineSpec:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise SpecError([f"{source}: {where}not valid YAML ({problem})"]) from None
    if not isinstance(data, dict):
        raise SpecError(
            [f"{source}: a spec is a mapping of keys (version: 1, name: ..., targets: ..., steps: ...)"]
        )
    try:
        return PipelineSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError([f"{source}: {line}" for line in describe_errors(err)]) from None


def describe_errors(err: ValidationError) -> list[str]:
    return [f"{key_path(e['loc']) or '(top)'}: {_message(e)}" for e in err.errors()]


def key_path(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _message(error: ErrorDetails) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    loc = tuple(error["loc"])
    if kind == "extra_forbidden":
        known = _known_keys(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"unknown key; {hint}keys here: {', '.join(known)}"
    if kind == "missing":
        return "missing; this key is required"
    if kind == "literal_error":
        return f"must be {ctx.get('expected', 'one of the listed values')} (got {error['input']!r})"
    if kind in ("string_type", "string_sub_type"):
        return f"must be a string (got {error['input']!r}); quote it if YAML reads it as something else"
    if kind == "list_type":
        return f'must be a list, e.g. ["..."] (got {error["input"]!r})'
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a mapping of keys, e.g. {{key: value}} (got {error['input']!r})"
    if kind == "too_short" and loc == ("steps",):
        return 'needs at least one step, e.g. [{name: migrate, prompt: "Migrate {{shard.files}} ..."}]'
    message = error["msg"]
    # Our own errors are already worded for the spec; pydantic's start "Value error, ".
    return message.removeprefix("Value error, ")


def _known_keys(loc: tuple[str | int, ...]) -> list[str]:
    model: type[BaseModel] | None = PipelineSpec
    for part in loc:
        if model is None:
            return []
        if isinstance(part, int):
            continue
        field = next(
            (f for name, f in model.model_fields.items() if (f.alias or name) == part),
            None,
        )
        model = _model_in(field.annotation) if field is not None else None
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The spec model inside `X | None` or `list[X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
