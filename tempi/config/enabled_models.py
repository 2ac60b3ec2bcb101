"""pi's `enabledModels` setting: the models Ctrl+P cycles through, chosen with /scoped-models.
Entries are `provider/id`, a bare `id`, or glob patterns of either (`anthropic/*`)."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from tempi.agent.model_spec import ModelSpec

ENABLED_MODELS_KEY = "enabledModels"


def model_ref(model: ModelSpec) -> str:
    return f"{model.provider}/{model.id}"


def enabled_patterns(settings: dict[str, Any]) -> list[str]:
    value = settings.get(ENABLED_MODELS_KEY)
    return [str(v) for v in value if isinstance(v, str)] if isinstance(value, list) else []


def matches(model: ModelSpec, pattern: str) -> bool:
    # pi allows `provider/id:level`; the level does not choose the model.
    name = pattern.rsplit(":", 1)[0] if ":" in pattern.rsplit("/", 1)[-1] else pattern
    return fnmatchcase(model_ref(model), name) or fnmatchcase(model.id, name)
