"""Real providers, only when their key is set (never in CI)."""

from __future__ import annotations

import os

import pytest

from tempi.activities.llm import StreamOptions, complete
from tempi.agent.llm_context import LlmContext
from tempi.agent.messages import TextContent, UserMessage
from tempi.agent.model_registry import builtin_registry

LIVE = [
    ("anthropic", "claude-haiku-4-5", "ANTHROPIC_API_KEY"),
    ("openai", "gpt-5-mini", "OPENAI_API_KEY"),
]


@pytest.mark.live
@pytest.mark.parametrize(("provider", "model_id", "key_var"), LIVE)
async def test_live_provider_answers(provider: str, model_id: str, key_var: str) -> None:
    key = os.environ.get(key_var)
    if not key:
        pytest.skip(f"{key_var} is not set; live provider tests run only with a real key")
    model = builtin_registry().find(provider, model_id)
    assert model is not None
    context = LlmContext(
        system_prompt="Answer with one word.",
        messages=[UserMessage(content=[TextContent(text="Say the word: pineapple")], timestamp=0)],
    )
    message = await complete(model, context, StreamOptions(api_key=key))
    assert message.stop_reason == "stop", message.error_message
    assert "pineapple" in message.text().lower()
    assert message.usage.input > 0 and message.usage.cost.total > 0
