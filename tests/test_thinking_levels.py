"""The thinking-level rule that RPC (set_thinking_level, set_model, cycle_model) and the
interactive /thinking and /model commands share through SessionClient. Before, each had
its own copy and they disagreed (a model without "off" kept "off" in one of them); the
expected values are what pi 0.73.1's getSupportedThinkingLevels/clampThinkingLevel return."""

from __future__ import annotations

import pytest

from tempi.agent.model_spec import THINKING_LEVELS, ModelSpec, ThinkingLevel
from tempi.agent.thinking_levels import clamp_level, level_after_switch, next_level, supported_levels


def _model(reasoning: bool, mapping: dict[str, str | None] | None = None) -> ModelSpec:
    return ModelSpec(
        id="m", api="openai-completions", provider="p", reasoning=reasoning, thinking_level_map=mapping
    )


# name: (model, pi's supported levels, pi's clamp of off, minimal, low, medium, high, xhigh)
PI = {
    "plain": (_model(False), ["off"], ["off"] * 6),
    "reasoning": (
        _model(True),
        ["off", "minimal", "low", "medium", "high"],
        ["off", "minimal", "low", "medium", "high", "high"],
    ),
    "xhigh mapped": (
        _model(True, {"xhigh": "max"}),
        list(THINKING_LEVELS),
        list(THINKING_LEVELS),
    ),
    "no off, xhigh": (
        _model(True, {"off": None, "xhigh": "xhigh"}),
        ["minimal", "low", "medium", "high", "xhigh"],
        ["minimal", "minimal", "low", "medium", "high", "xhigh"],
    ),
    "no minimal": (
        _model(True, {"minimal": None}),
        ["off", "low", "medium", "high"],
        ["off", "low", "low", "medium", "high", "high"],
    ),
    "no off": (
        _model(True, {"off": None}),
        ["minimal", "low", "medium", "high"],
        ["minimal", "minimal", "low", "medium", "high", "high"],
    ),
}


@pytest.mark.parametrize("name", PI)
def test_levels_and_clamping_match_pi(name: str) -> None:
    model, supported, clamped = PI[name]
    assert supported_levels(model) == supported
    assert [clamp_level(model, level) for level in THINKING_LEVELS] == clamped


def test_the_cases_the_two_old_copies_got_differently_now_follow_pi() -> None:
    assert clamp_level(_model(False), "high") == "off"  # a model that cannot think
    assert clamp_level(_model(True), "xhigh") == "high"  # xhigh without a mapping
    # A model whose "off" is unsupported thinks at least minimally (one old copy kept "off").
    assert clamp_level(_model(True, {"off": None}), "off") == "minimal"


def test_cycling_walks_the_supported_levels_and_wraps() -> None:
    model = _model(True, {"off": None, "xhigh": "xhigh"})
    level: ThinkingLevel = "minimal"
    seen = []
    for _ in range(5):
        cycled = next_level(model, level)
        assert cycled is not None
        level = cycled
        seen.append(level)
    assert seen == ["low", "medium", "high", "xhigh", "minimal"]
    assert next_level(_model(False), "off") is None


def test_a_model_switch_keeps_the_level_or_takes_the_default_coming_from_a_model_that_cannot_think() -> None:
    plain, thinker = _model(False), _model(True)
    assert level_after_switch(thinker, "xhigh", _model(True, {"xhigh": "max"})) == "xhigh"
    assert level_after_switch(_model(True, {"xhigh": "max"}), "xhigh", thinker) == "high"
    assert level_after_switch(plain, "off", thinker) == "medium"  # pi's default
    assert level_after_switch(plain, "off", thinker, default_level="low") == "low"
    assert level_after_switch(thinker, "high", plain) == "off"
