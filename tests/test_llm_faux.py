"""The stream contract, exercised through the in-process faux provider."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest

from tempi.activities.llm import (
    FauxResponse,
    FauxToolCall,
    FauxUsage,
    StreamOptions,
    classify_error,
    clear_faux,
    complete,
    register_faux,
    stream_assistant,
)
from tempi.agent.llm_context import LlmContext
from tempi.agent.messages import TextContent, ThinkingContent, ToolCall, ToolResultMessage, UserMessage
from tempi.agent.model_spec import ModelCost, ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent
from tempi.agent.tool_specs import tool_specs

FAUX = ModelSpec(id="faux-1", api="faux", provider="faux", cost=ModelCost(input=2, output=10))
CONTEXT = LlmContext(system_prompt="be brief", messages=[UserMessage(content="hello", timestamp=1)])
OPTIONS = StreamOptions()


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    clear_faux()
    yield
    clear_faux()


async def collect(model: ModelSpec = FAUX, abort: asyncio.Event | None = None) -> list[AssistantMessageEvent]:
    return [event async for event in stream_assistant(model, CONTEXT, OPTIONS, abort)]


async def test_a_full_answer_streams_like_a_provider() -> None:
    register_faux(
        FAUX.id,
        [
            FauxResponse(
                thinking="Let me look at the file first.",
                text="Reading it now, then listing the directory.",
                tool_calls=[
                    FauxToolCall(name="read", arguments={"path": "a.py"}, id="call_1"),
                    FauxToolCall(name="ls", arguments={"path": "."}, id="call_2"),
                ],
            )
        ],
    )
    events = await collect()
    kinds = [event.type for event in events]
    assert kinds[0] == "start" and kinds[-1] == "done"
    assert [k for k in kinds if k.endswith(("_start", "_end")) and k != "start"] == [
        "thinking_start", "thinking_end", "text_start", "text_end",
        "toolcall_start", "toolcall_end", "toolcall_start", "toolcall_end",
    ]  # fmt: skip
    final = events[-1]
    assert final.type == "done" and final.reason == "toolUse"
    message = final.message
    assert [type(block) for block in message.content] == [ThinkingContent, TextContent, ToolCall, ToolCall]
    assert message.text() == "Reading it now, then listing the directory."
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls()] == [
        ("call_1", "read", {"path": "a.py"}),
        ("call_2", "ls", {"path": "."}),
    ]
    assert (message.api, message.provider, message.model) == ("faux", "faux", "faux-1")


async def test_partials_are_snapshots_that_grow() -> None:
    register_faux(FAUX.id, [FauxResponse(text="x" * 100)])
    events = await collect()
    texts = [event.partial.text() for event in events if event.type == "text_delta"]
    assert len(texts) > 2
    assert all(len(a) < len(b) for a, b in itertools.pairwise(texts))
    assert texts[-1] == "x" * 100


async def test_tool_call_partials_show_arguments_parsed_so_far() -> None:
    register_faux(
        FAUX.id,
        [
            FauxResponse(
                tool_calls=[FauxToolCall(name="write", arguments={"path": "p.txt", "content": "c" * 80})]
            )
        ],
    )
    events = await collect()
    partial_arguments = [
        event.partial.tool_calls()[0].arguments for event in events if event.type == "toolcall_delta"
    ]
    assert "content" not in partial_arguments[0]
    assert any(args.get("path") == "p.txt" and "content" in args for args in partial_arguments[:-1])
    assert partial_arguments[-1] == {"path": "p.txt", "content": "c" * 80}


async def test_invalid_argument_json_ends_as_empty_arguments_and_the_turn_goes_on() -> None:
    register_faux(
        FAUX.id, [FauxResponse(tool_calls=[FauxToolCall(name="bash", arguments='{"command": "ls', id="c")])]
    )
    events = await collect()
    end = next(event for event in events if event.type == "toolcall_end")
    assert end.type == "toolcall_end" and end.tool_call.arguments == {}
    assert events[-1].type == "done" and events[-1].reason == "toolUse"


async def test_responses_are_consumed_in_order_and_a_callable_sees_the_context() -> None:
    seen: list[str] = []

    def echo(context: LlmContext) -> FauxResponse:
        seen.append(context.system_prompt)
        return FauxResponse(text=f"you said {context.messages[-1].text()}")

    register_faux(FAUX.id, [FauxResponse(text="first"), echo])
    assert (await complete(FAUX, CONTEXT, OPTIONS)).text() == "first"
    assert (await complete(FAUX, CONTEXT, OPTIONS)).text() == "you said hello"
    assert seen == ["be brief"]
    exhausted = await complete(FAUX, CONTEXT, OPTIONS)
    assert exhausted.stop_reason == "error"
    assert "no scripted response left" in (exhausted.error_message or "")


async def test_usage_is_priced_with_the_model_rates() -> None:
    register_faux(FAUX.id, [FauxResponse(text="ok", usage=FauxUsage(input=1000, output=500, cache_read=200))])
    message = await complete(FAUX, CONTEXT, OPTIONS)
    assert message.usage.total_tokens == 1700
    assert message.usage.cost.total == pytest.approx(1000 * 2 / 1e6 + 500 * 10 / 1e6)


async def test_a_scripted_failure_ends_with_an_error_event_keeping_content() -> None:
    register_faux(
        FAUX.id, [FauxResponse(text="partial", stop_reason="error", error_message="503 upstream unavailable")]
    )
    events = await collect()
    assert events[0].type == "start"
    final = events[-1]
    assert final.type == "error" and final.reason == "error"
    assert final.error.stop_reason == "error"
    assert final.error.error_message == "503 upstream unavailable"
    assert final.error.text() == "partial"
    assert classify_error(final.error) == "retryable"


async def test_length_stop_is_a_normal_finish() -> None:
    register_faux(FAUX.id, [FauxResponse(text="cut", stop_reason="length")])
    events = await collect()
    assert events[-1].type == "done" and events[-1].reason == "length"


async def test_abort_mid_stream_ends_aborted_with_the_partial_text() -> None:
    register_faux(FAUX.id, [FauxResponse(text="word " * 200, delay_ms=1)])
    abort = asyncio.Event()
    events: list[AssistantMessageEvent] = []
    async for event in stream_assistant(FAUX, CONTEXT, OPTIONS, abort):
        events.append(event)
        if event.type == "text_delta" and len(events) == 5:
            abort.set()
    final = events[-1]
    assert final.type == "error" and final.reason == "aborted"
    assert final.error.stop_reason == "aborted"
    assert final.error.text().startswith("word ")
    assert len(final.error.text()) < len("word " * 200)
    assert classify_error(final.error) is None


async def test_abort_before_the_call_sends_nothing() -> None:
    register_faux(FAUX.id, [FauxResponse(text="never")])
    abort = asyncio.Event()
    abort.set()
    events = await collect(abort=abort)
    assert [event.type for event in events] == ["start", "error"]
    assert (await complete(FAUX, CONTEXT, OPTIONS)).text() == "never"


async def test_setup_problems_become_error_events() -> None:
    unknown = ModelSpec(id="m", api="carrier-pigeon", provider="p")
    events = await collect(unknown)
    assert [event.type for event in events] == ["start", "error"]
    final = events[-1]
    assert final.type == "error" and "Unknown API 'carrier-pigeon'" in (final.error.error_message or "")

    keyless = ModelSpec(id="gpt-x", api="openai-completions", provider="openai")
    message = await complete(keyless, CONTEXT, OPTIONS)
    assert message.stop_reason == "error"
    assert "No API key for provider 'openai'" in (message.error_message or "")
    assert classify_error(message) == "fatal"


async def test_task_cancellation_propagates() -> None:
    register_faux(FAUX.id, [FauxResponse(text="slow " * 100, delay_ms=20)])
    started = asyncio.Event()

    async def consume() -> None:
        async for event in stream_assistant(FAUX, CONTEXT, OPTIONS):
            if event.type == "text_delta":
                started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_offline_demo_looks_around_then_reports_what_it_found() -> None:
    demo = ModelSpec(id="demo", api="faux", provider="faux")
    ls = tool_specs(["ls"])
    asked = LlmContext(system_prompt="", messages=[UserMessage(content="look around", timestamp=1)], tools=ls)
    first = await complete(demo, asked, OPTIONS)
    assert "You asked: look around" in first.text()
    [call] = first.tool_calls()
    assert (call.name, call.arguments) == ("ls", {"path": "."})

    listing = ToolResultMessage(
        tool_call_id=call.id, tool_name="ls", content=[TextContent(text="README.md\nsrc/")], timestamp=2
    )
    answered = asked.model_copy(update={"messages": [*asked.messages, first, listing]})
    second = await complete(demo, answered, OPTIONS)
    assert "README.md\nsrc/" in second.text() and not second.tool_calls()
