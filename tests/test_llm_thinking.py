"""Thinking levels mapped onto each API's reasoning parameters."""

from __future__ import annotations

import pytest

from tempi.activities.llm.thinking import (
    anthropic_thinking,
    effective_level,
    openai_reasoning_effort,
    responses_reasoning,
)
from tempi.agent.model_spec import ModelSpec, ThinkingLevel

SONNET = ModelSpec(
    id="claude-sonnet-4-5", api="anthropic-messages", provider="anthropic", reasoning=True, max_tokens=64_000
)
HAIKU_NO_REASONING = ModelSpec(id="claude-3-5-haiku", api="anthropic-messages", provider="anthropic")
GPT5 = ModelSpec(id="gpt-5", api="openai-responses", provider="openai", reasoning=True)


@pytest.mark.parametrize(
    ("level", "budget"),
    [("minimal", 1024), ("low", 2048), ("medium", 8192), ("high", 16384), ("xhigh", 16384)],
)
def test_anthropic_budgets_follow_pi_and_raise_max_tokens(level: ThinkingLevel, budget: int) -> None:
    plan = anthropic_thinking(SONNET, level, max_tokens=16384)
    # pi sends display "summarized" with every budget (providers.md, pi-ai anthropic.js).
    assert plan.thinking == {"type": "enabled", "budget_tokens": budget, "display": "summarized"}
    assert plan.max_tokens == 16384 + budget


def test_anthropic_budget_shrinks_to_leave_room_for_the_answer() -> None:
    small = SONNET.model_copy(update={"max_tokens": 8192})
    plan = anthropic_thinking(small, "high", max_tokens=8192)
    assert plan.max_tokens == 8192
    assert plan.thinking == {"type": "enabled", "budget_tokens": 8192 - 1024, "display": "summarized"}


def test_anthropic_without_room_for_thinking_sends_none() -> None:
    tiny = SONNET.model_copy(update={"max_tokens": 1500})
    plan = anthropic_thinking(tiny, "medium", max_tokens=1500)
    assert plan.thinking is None and plan.max_tokens == 1500


@pytest.mark.parametrize("model", [SONNET, HAIKU_NO_REASONING])
def test_off_or_a_non_reasoning_model_sends_no_thinking(model: ModelSpec) -> None:
    level: ThinkingLevel = "off" if model is SONNET else "high"
    plan = anthropic_thinking(model, level, max_tokens=4096)
    assert plan.thinking is None and plan.output_config is None and plan.max_tokens == 4096


def test_adaptive_claude_models_get_an_effort_instead_of_a_budget() -> None:
    opus = ModelSpec(id="claude-opus-4-6", api="anthropic-messages", provider="anthropic", reasoning=True)
    plan = anthropic_thinking(opus, "xhigh", max_tokens=16384)
    assert plan.thinking == {"type": "adaptive", "display": "summarized"}
    assert plan.output_config == {"effort": "max"}
    assert plan.max_tokens == 16384


def test_openai_effort_names_and_xhigh_clamping() -> None:
    assert openai_reasoning_effort(GPT5, "minimal") == "minimal"
    assert openai_reasoning_effort(GPT5, "xhigh") == "high"
    codex_max = GPT5.model_copy(update={"id": "gpt-5.1-codex-max"})
    assert openai_reasoning_effort(codex_max, "xhigh") == "xhigh"
    flagged = GPT5.model_copy(update={"compat": {"supportsXhigh": True}})
    assert effective_level(flagged, "xhigh") == "xhigh"
    assert openai_reasoning_effort(GPT5, "off") is None
    assert openai_reasoning_effort(GPT5.model_copy(update={"reasoning": False}), "high") is None


def test_responses_reasoning_asks_for_summaries() -> None:
    assert responses_reasoning(GPT5, "low") == {"effort": "low", "summary": "auto"}
    assert responses_reasoning(GPT5, "off") is None


def test_a_thinking_level_map_renames_or_removes_levels() -> None:
    mapped = GPT5.model_copy(
        update={"thinking_level_map": {"minimal": None, "high": "max", "xhigh": "ultra"}}
    )
    assert openai_reasoning_effort(mapped, "high") == "max"
    assert openai_reasoning_effort(mapped, "xhigh") == "ultra"
    assert openai_reasoning_effort(mapped, "medium") == "medium"
    assert openai_reasoning_effort(mapped, "minimal") is None
    no_xhigh = GPT5.model_copy(update={"id": "gpt-5.2", "thinking_level_map": {"xhigh": None}})
    assert openai_reasoning_effort(no_xhigh, "xhigh") == "high"
    opus = ModelSpec(
        id="claude-opus-4-6",
        api="anthropic-messages",
        provider="anthropic",
        reasoning=True,
        thinking_level_map={"xhigh": "xhigh"},
    )
    assert anthropic_thinking(opus, "xhigh", max_tokens=8192).output_config == {"effort": "xhigh"}
