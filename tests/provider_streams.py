"""What the provider tests over the scripted server share: the scenarios every wire format
plays (tool calls, a cut-short answer, a slow and a dropped stream...), the tools and context
they are asked with, and the helpers that stream a call and read its outcome."""

from __future__ import annotations

import asyncio
from typing import Any

from tempi.activities.llm import StreamOptions, stream_assistant
from tempi.agent.llm_context import LlmContext, ToolSpec
from tempi.agent.messages import (
    AssistantMessage,
    LlmMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent, ErrorEvent

LONG_TEXT = "streaming text in small pieces " * 8
TOOL_THOUGHT = "I need the file and the listing."
# The calls the "tools" scenario makes, as (name, arguments).
SCRIPTED_CALLS = [
    ("read", {"path": "src/main.py", "limit": 20}),
    ("bash", {"command": "ls -la && echo 'done'"}),
]
STREAM_SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "text": [
        {
            "text": "The quick brown fox jumps over the lazy dog.",
            "chunk_size": 5,
            "usage": {"input": 1200, "output": 300, "cacheRead": 100, "cacheWrite": 40},
        }
    ],
    "thinking": [{"thinking": "Weighing both options carefully.", "text": "Option B.", "chunk_size": 6}],
    "tools": [
        {
            "thinking": TOOL_THOUGHT,
            "text": "Checking two things.",
            "tool_calls": [{"name": name, "arguments": arguments} for name, arguments in SCRIPTED_CALLS],
            "chunk_size": 5,
        },
        {"text": "Both checked."},
    ],
    "length": [{"text": "cut short", "stop_reason": "length"}],
    "overflow": [{"overflow": True}],
    "slow": [{"text": LONG_TEXT, "chunk_size": 4, "chunk_delay_ms": 15}],
    "dropped": [{"text": LONG_TEXT, "chunk_size": 4, "drop_after_chunks": 8}],
}
TOOLS = [
    ToolSpec(
        name="read",
        description="Read a file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "limit": {"type": "number"}},
            "required": ["path"],
        },
    ),
    ToolSpec(
        name="bash",
        description="Run a command.",
        parameters={"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    ),
]
CONTEXT = LlmContext(
    system_prompt="You are a test assistant.",
    messages=[UserMessage(content="Please help.", timestamp=1)],
    tools=TOOLS,
)
OPTIONS = StreamOptions(api_key="test-key")


def per_api(scenarios: dict[str, Any], apis: list[str]) -> dict[str, Any]:
    """Each scenario once per API: the server counts failures per scenario and turn."""
    return {scenario(name, api): turns for name, turns in scenarios.items() for api in apis}


def scenario(name: str, api: str) -> str:
    return f"{name}-{api}"


async def collect(
    model: ModelSpec,
    context: LlmContext = CONTEXT,
    options: StreamOptions = OPTIONS,
    abort: asyncio.Event | None = None,
) -> list[AssistantMessageEvent]:
    # The lead always passes an abort event; an unset one must change nothing.
    signal = abort if abort is not None else asyncio.Event()
    return [event async for event in stream_assistant(model, context, options, signal)]


def final_message(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert last.type in ("done", "error")
    return last.message if last.type == "done" else last.error


async def aborted_after_three_deltas(model: ModelSpec, options: StreamOptions = OPTIONS) -> ErrorEvent:
    """The last event of a call aborted once three text deltas have come."""
    abort = asyncio.Event()
    events: list[AssistantMessageEvent] = []
    async for event in stream_assistant(model, CONTEXT, options, abort):
        events.append(event)
        if [e.type for e in events].count("text_delta") == 3:
            abort.set()
    last = events[-1]
    assert last.type == "error" and last.reason == "aborted"
    return last


def ok_results(calls: list[ToolCall]) -> list[LlmMessage]:
    """A "<name> ok" result for each call."""
    return [
        ToolResultMessage(
            tool_call_id=c.id, tool_name=c.name, content=[TextContent(text=f"{c.name} ok")], timestamp=5
        )
        for c in calls
    ]
