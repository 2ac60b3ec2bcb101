"""pi's --models: the models Ctrl+P cycles through, by id, fuzzy name or glob, each with
an optional `:thinking` level that the switch brings along."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import cast

from pydantic import BaseModel

from tempi.agent.model_registry import ModelRegistry
from tempi.agent.model_selection import ModelSelectionError, select_model
from tempi.agent.model_spec import THINKING_LEVELS, ModelSpec, ThinkingLevel

_GLOB_CHARS = frozenset("*?[")


class ScopedModel(BaseModel):
    model: ModelSpec
    thinking_level: ThinkingLevel | None = None


def _matches(registry: ModelRegistry, pattern: str) -> list[ScopedModel]:
    if _GLOB_CHARS & set(pattern):
        matches = _glob(pattern, registry.models)
        if not matches:
            raise ModelSelectionError(f'--models: "{pattern}" matches no model. Run `tempi --list-models`.')
        return matches
    selection = select_model(registry, None, pattern)
    return [ScopedModel(model=selection.model, thinking_level=selection.thinking_level)]


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


def scoped_models(
    registry: ModelRegistry, patterns: str | Sequence[str], *, strict: bool = True
) -> list[ScopedModel]:
    """The models `patterns` (a list, or comma-separated as --models takes them) name, in
    order, each once. A pattern that names none raises ModelSelectionError when `strict` (a
    flag the user just typed), and is passed over otherwise (a saved `enabledModels` entry
    for a model since removed from models.json)."""
    found: list[ScopedModel] = []
    listed = patterns.split(",") if isinstance(patterns, str) else patterns
    for pattern in (p.strip() for p in listed):
        if not pattern:
            continue
        try:
            matches = _matches(registry, pattern)
        except ModelSelectionError:
            if strict:
                raise
            continue
        for match in matches:
            if all((s.model.provider, s.model.id) != (match.model.provider, match.model.id) for s in found):
                found.append(match)
    return found
