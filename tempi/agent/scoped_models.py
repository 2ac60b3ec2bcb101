"""pi's --models: the models Ctrl+P cycles through, by id, fuzzy name or glob, each with
an optional `:thinking` level that the switch brings along."""

from __future__ import annotations

import fnmatch
from typing import cast

from pydantic import BaseModel

from tempi.agent.model_registry import ModelRegistry, ModelSelectionError, select_model
from tempi.agent.model_spec import THINKING_LEVELS, ModelSpec, ThinkingLevel

_GLOB_CHARS = frozenset("*?[")


class ScopedModel(BaseModel):
    model: ModelSpec
    thinking_level: ThinkingLevel | None = None


def _glob(pattern: str, models: list[ModelSpec]) -> list[ScopedModel]:
    level: ThinkingLevel | None = None
    head, colon, suffix = pattern.rpartition(":")
    if colon and suffix in THINKING_LEVELS:
        pattern, level = head, cast(ThinkingLevel, suffix)
    wanted = pattern.lower()
    return [
        ScopedModel(model=m, thinking_level=level)
        for m in models
        if fnmatch.fnmatchcase(f"{m.provider}/{m.id}".lower(), wanted)
        or fnmatch.fnmatchcase(m.id.lower(), wanted)
    ]


def scoped_models(registry: ModelRegistry, patterns: str) -> list[ScopedModel]:
    """The models `patterns` (comma-separated) name, in order, each once. Raises
    ModelSelectionError for a pattern that names none."""
    found: list[ScopedModel] = []
    for pattern in (p.strip() for p in patterns.split(",")):
        if not pattern:
            continue
        if _GLOB_CHARS & set(pattern):
            matches = _glob(pattern, registry.models)
            if not matches:
                raise ModelSelectionError(
                    f'--models: "{pattern}" matches no model. Run `tempi --list-models`.'
                )
        else:
            selection = select_model(registry, None, pattern)
            matches = [ScopedModel(model=selection.model, thinking_level=selection.thinking_level)]
        for match in matches:
            if all((s.model.provider, s.model.id) != (match.model.provider, match.model.id) for s in found):
                found.append(match)
    return found
