"""What a thinking level asks of each API.

Levels are pi's: off, minimal, low, medium, high, xhigh. A model without reasoning ignores
the level; xhigh means high unless the model is known to go further. A model's
`thinking_level_map` (from models.json) can rename a level for its provider or mark it
unsupported (None), in which case the next lower level is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tempi.agent.model_spec import ModelSpec, ThinkingLevel

# pi's Anthropic thinking budgets, in tokens.
THINKING_BUDGETS: dict[ThinkingLevel, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
}
# pi asks for summarized thinking on every model, so Opus 4.7 (whose API default is to
# omit it) shows its thinking like older Claude 4 models do.
THINKING_DISPLAY = "summarized"
# Anthropic refuses a budget below this; the answer itself needs room too.
MIN_THINKING_BUDGET = 1024
MIN_OUTPUT_TOKENS = 1024

_ADAPTIVE_EFFORTS: dict[ThinkingLevel, str] = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "max",
}
_XHIGH_MODEL_MARKERS = ("gpt-5.1-codex-max", "gpt-5.2", "gpt-5.3", "gpt-5.4", "gpt-5.5")
_ADAPTIVE_MODEL_MARKERS = ("opus-4-6", "opus-4.6", "sonnet-4-6", "sonnet-4.6")


def supports_xhigh(model: ModelSpec) -> bool:
    flag = (model.compat or {}).get("supportsXhigh")
    if isinstance(flag, bool):
        return flag
    # Adaptive Claude models have an effort above high ("max").
    return uses_adaptive_thinking(model) or any(marker in model.id for marker in _XHIGH_MODEL_MARKERS)


def uses_adaptive_thinking(model: ModelSpec) -> bool:
    """Claude models that decide their own thinking budget and take an effort level instead."""
    flag = (model.compat or {}).get("adaptiveThinking")
    if isinstance(flag, bool):
        return flag
    return any(marker in model.id for marker in _ADAPTIVE_MODEL_MARKERS)


def effective_level(model: ModelSpec, level: ThinkingLevel) -> ThinkingLevel | None:
    """The level to request, or None when no reasoning should be requested at all.

    A level the model does not support falls back to the next lower one it does.
    """
    if level == "off" or not model.reasoning:
        return None
    for candidate in reversed(_LEVELS_UP_TO[level]):
        if _supports(model, candidate):
            return candidate
    return None


def provider_value(model: ModelSpec, level: ThinkingLevel, default: str | None = None) -> str:
    """The provider's own name for `level`, from the model's thinking_level_map when it has one."""
    mapped = (model.thinking_level_map or {}).get(level)
    return mapped or default or level


_ORDER: tuple[ThinkingLevel, ...] = ("minimal", "low", "medium", "high", "xhigh")
_LEVELS_UP_TO: dict[ThinkingLevel, tuple[ThinkingLevel, ...]] = {
    level: _ORDER[: _ORDER.index(level) + 1] for level in _ORDER
}


def _supports(model: ModelSpec, level: ThinkingLevel) -> bool:
    mapping = model.thinking_level_map or {}
    if level in mapping:
        return mapping[level] is not None
    return level != "xhigh" or supports_xhigh(model)


@dataclass(frozen=True)
class AnthropicThinking:
    max_tokens: int
    thinking: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None


def anthropic_thinking(model: ModelSpec, level: ThinkingLevel, max_tokens: int) -> AnthropicThinking:
    """The `thinking` parameter and the `max_tokens` that leaves room for it."""
    chosen = effective_level(model, level)
    if chosen is None:
        return AnthropicThinking(max_tokens=max_tokens)
    if uses_adaptive_thinking(model):
        effort = provider_value(model, chosen, _ADAPTIVE_EFFORTS[chosen])
        return AnthropicThinking(
            max_tokens=max_tokens,
            thinking={"type": "adaptive", "display": THINKING_DISPLAY},
            output_config={"effort": effort},
        )
    budget = THINKING_BUDGETS[chosen]
    total = min(max_tokens + budget, model.max_tokens)
    if total <= budget:
        budget = total - MIN_OUTPUT_TOKENS
    if budget < MIN_THINKING_BUDGET:
        return AnthropicThinking(max_tokens=max_tokens)
    return AnthropicThinking(
        max_tokens=total,
        thinking={"type": "enabled", "budget_tokens": budget, "display": THINKING_DISPLAY},
    )


def openai_reasoning_effort(model: ModelSpec, level: ThinkingLevel) -> str | None:
    """`reasoning_effort` for chat completions and `reasoning.effort` for Responses."""
    chosen = effective_level(model, level)
    return None if chosen is None else provider_value(model, chosen)


def responses_reasoning(model: ModelSpec, level: ThinkingLevel) -> dict[str, Any] | None:
    effort = openai_reasoning_effort(model, level)
    if effort is None:
        return None
    return {"effort": effort, "summary": "auto"}


def responses_reasoning_when_off(model: ModelSpec) -> dict[str, Any] | None:
    """pi's Azure requests with thinking off: a reasoning model is told the
    effort its map gives `off` ("none" by default); a map saying `off: null` (the model
    cannot stop reasoning) sends nothing."""
    mapping = model.thinking_level_map or {}
    if not model.reasoning or ("off" in mapping and mapping["off"] is None):
        return None
    return {"effort": mapping.get("off") or "none"}
