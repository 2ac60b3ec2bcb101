"""Which thinking levels a model accepts, and how a level it does not accept is moved to
one it does: pi-ai's getSupportedThinkingLevels / clampThinkingLevel, so every front end
(and a pi client talking to tempi) sees the same level after a change."""

from __future__ import annotations

from tempi.agent.model_spec import THINKING_LEVELS, ModelSpec, ThinkingLevel

# pi's level for a model that can think when nothing else chose one.
DEFAULT_THINKING_LEVEL: ThinkingLevel = "medium"


def supported_levels(model: ModelSpec) -> list[ThinkingLevel]:
    """A level mapped to None is unsupported; xhigh only where the model maps it."""
    if not model.reasoning:
        return ["off"]
    mapping = model.thinking_level_map or {}
    return [
        level
        for level in THINKING_LEVELS
        if not (level in mapping and mapping[level] is None) and (level != "xhigh" or level in mapping)
    ]


def clamp_level(model: ModelSpec, level: ThinkingLevel) -> ThinkingLevel:
    """The nearest supported level, looking upward first (pi's order: a model without
    `off` thinks at least minimally; xhigh without a mapping falls back to high)."""
    supported = supported_levels(model)
    if level in supported:
        return level
    index = THINKING_LEVELS.index(level)
    for candidate in (*THINKING_LEVELS[index + 1 :], *reversed(THINKING_LEVELS[:index])):
        if candidate in supported:
            return candidate
    return supported[0] if supported else "off"


def next_level(model: ModelSpec, current: ThinkingLevel) -> ThinkingLevel | None:
    """The level after `current` in the model's cycle; None when the model cannot think."""
    if not model.reasoning:
        return None
    supported = supported_levels(model)
    index = supported.index(current) if current in supported else -1
    return supported[(index + 1) % len(supported)]


def level_after_switch(
    old_model: ModelSpec,
    level: ThinkingLevel,
    new_model: ModelSpec,
    default_level: ThinkingLevel = DEFAULT_THINKING_LEVEL,
) -> ThinkingLevel:
    """The level once `new_model` replaces `old_model`: the current one, clamped; coming
    from a model that cannot think (so its "off" was no choice), the default level."""
    return clamp_level(new_model, level if old_model.reasoning else default_level)
