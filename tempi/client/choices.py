"""What a front end does with the user's model and thinking choices (tempi's CLI saves
them to settings.json, as pi does); the session API itself keeps no files of its own."""

from __future__ import annotations

from typing import Protocol

from tempi.agent.model_spec import ModelSpec, ThinkingLevel


class ChoiceMemory(Protocol):
    def __call__(self, model: ModelSpec | None = None, level: ThinkingLevel | None = None) -> None: ...


def level_worth_remembering(model: ModelSpec, old: ThinkingLevel, new: ThinkingLevel) -> bool:
    """pi's rule: a level is saved when it changed, unless it is the "off" of a model that
    cannot think (which says nothing about what the user wants from one that can)."""
    return new != old and (model.reasoning or new != "off")
