"""Chat-completions chunks from OpenAI-compatible servers that bend the format."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.errors import IncompleteStreamError, ProviderError
from tempi.activities.llm.openai_completions import _content_events
from tempi.agent.model_spec import ModelSpec

MODEL = ModelSpec(id="local", api="openai-completions", provider="local")


def chunk(finish_reason: str | None = None, **delta: Any) -> SimpleNamespace:
    fields = {"content": None, "tool_calls": None, **delta}
    choice = SimpleNamespace(delta=SimpleNamespace(**fields), finish_reason=finish_reason)
    return SimpleNamespace(id="chatcmpl-1", usage=None, choices=[choice])


def tool_delta(index: int | None, call_id: str | None, name: str | None, arguments: str) -> SimpleNamespace:
    return SimpleNamespace(index=index, id=call_id, function=SimpleNamespace(name=name, arguments=arguments))


async def run(chunks: list[SimpleNamespace]) -> MessageAssembler:
    async def source() -> AsyncIterator[Any]:
        for item in chunks:
            yield item

    assembler = MessageAssembler(MODEL)
    async for _ in _content_events(source(), assembler):
        pass
    return assembler


async def test_tool_deltas_without_index_are_matched_by_id_then_by_position() -> None:
    assembler = await run(
        [
            chunk(reasoning_content="thinking about it"),
            chunk(tool_calls=[tool_delta(None, "a", "read", '{"pa')]),
            chunk(tool_calls=[tool_delta(None, None, None, 'th": "x"}')]),
            chunk(tool_calls=[tool_delta(None, "b", "ls", "{}")]),
            chunk(finish_reason="stop"),
        ]
    )
    message = assembler.message
    assert message.content[0].type == "thinking"
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls()] == [
        ("a", "read", {"path": "x"}),
        ("b", "ls", {}),
    ]
    # "stop" with tool calls still means the model wants its tools run.
    assert message.stop_reason == "toolUse"


async def test_a_stream_that_stops_without_a_finish_reason_is_incomplete() -> None:
    with pytest.raises(IncompleteStreamError):
        await run([chunk(content="half")])


async def test_a_content_filter_stop_is_a_failure() -> None:
    with pytest.raises(ProviderError, match="content filter"):
        await run([chunk(content="no"), chunk(finish_reason="content_filter")])
