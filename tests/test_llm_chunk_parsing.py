"""Chat-completions chunks from OpenAI-compatible servers that bend the format, as the JSON
they send."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.errors import IncompleteStreamError, ProviderError
from tempi.activities.llm.openai_completions import _content_events
from tempi.agent.model_spec import ModelSpec

MODEL = ModelSpec(id="local", api="openai-completions", provider="local")


def chunk(finish_reason: str | None = None, **delta: Any) -> dict[str, Any]:
    fields = {"content": None, "tool_calls": None, **delta}
    choice = {"index": 0, "delta": fields, "finish_reason": finish_reason}
    return {"id": "chatcmpl-1", "usage": None, "choices": [choice]}


def tool_delta(index: int | None, call_id: str | None, name: str | None, arguments: str) -> dict[str, Any]:
    call: dict[str, Any] = {"id": call_id, "function": {"name": name, "arguments": arguments}}
    if index is not None:
        call["index"] = index
    return call


async def run(chunks: list[Any]) -> MessageAssembler:
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


async def test_nulls_and_missing_fields_read_alike() -> None:
    assembler = await run(
        [
            {"id": "chatcmpl-2", "choices": None},
            {"id": "chatcmpl-2", "choices": [{"delta": None, "finish_reason": None}]},
            {"id": "chatcmpl-2", "choices": [{"delta": {"content": "Hi"}}]},
            {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": None}]}}]},
            {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "ls"}}]}}]},
            {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]},
            {
                "choices": [{"delta": {}, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 3, "prompt_tokens_details": None},
            },
        ]
    )
    message = assembler.message
    assert message.response_id == "chatcmpl-2"
    assert message.content[0].type == "text" and message.content[0].text == "Hi"
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls()] == [("c1", "ls", {})]
    assert (message.usage.input, message.usage.output) == (12, 3)
    assert message.stop_reason == "toolUse"
