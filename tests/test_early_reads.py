"""An answer that only reads (read, ls) has its calls run by the model call's activity, so its
turn needs no local activity (tempi/activities/early_reads.py); an answer that also does
anything else runs its calls as before. Either way the user sees the same results, events
and session file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from tempi.activities.early_reads import early_calls
from tempi.agent.messages import AssistantMessage, ToolCall
from tempi.agent.model_spec import ModelSpec
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows.activity_payloads import LlmCallInput, SessionFileRef
from tests.history_payloads import local_activity_tools
from tests.session_harness import (
    assert_single_chain,
    running_worker,
    scripted_model,
    start_session,
    unique_queue,
)


async def test_an_answer_that_only_reads_is_read_by_its_model_call_with_the_same_results(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "early-reads",
        [
            {"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "one\n"}}]},
            # Only reads: run by the model call.
            {
                "tool_calls": [
                    {"name": "read", "arguments": {"path": "a.txt"}},
                    {"name": "ls", "arguments": {}},
                ]
            },
            {"tool_calls": [{"name": "read", "arguments": {"path": "missing.txt"}}]},
            # A read beside a command: both run as tool calls, in the workflow task.
            {
                "tool_calls": [
                    {"name": "read", "arguments": {"path": "a.txt"}},
                    {"name": "bash", "arguments": {"command": "cat a.txt >> log.txt"}},
                ]
            },
            {"text": "a.txt says one."},
        ],
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "early-reads"),
            task_queue=queue,
            tools=["read", "bash", "write", "ls"],
        )
        await s.prompt("Look at a.txt.")
        events = await s.run_to_idle()
        history = await s.handle.fetch_history()

    results = [
        (e["message"]["toolName"], e["message"]["content"][0]["text"], e["message"].get("isError", False))
        for e in events
        if e["type"] == "message_end" and e["message"]["role"] == "toolResult"
    ]
    assert [(name, error) for name, _, error in results] == [
        ("write", False),
        ("read", False),
        ("ls", False),
        ("read", True),
        ("read", False),
        ("bash", False),
    ]
    assert results[1][1] == results[4][1] == "one\n"
    assert "a.txt" in results[2][1]
    assert "missing.txt" in results[3][1]
    assert (Path(s.config.cwd) / "log.txt").read_text() == "one\n"  # the command ran once
    # Each call of the reading turn starts, then ends with its result, as a tool call does.
    turn = [
        (e["type"], e["toolName"])
        for e in events
        if e["type"] in ("tool_execution_start", "tool_execution_end") and e["toolCallId"].startswith("call")
    ]
    assert turn[2:6] == [
        ("tool_execution_start", "read"),
        ("tool_execution_start", "ls"),
        ("tool_execution_end", "read"),
        ("tool_execution_end", "ls"),
    ]
    # Only the write and the turn with a command took local activities.
    assert sorted(local_activity_tools(history.events)) == ["bash", "read", "write"]

    entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()]
    assert_single_chain(entries)
    tool_results = [e["message"] for e in entries if e.get("message", {}).get("role") == "toolResult"]
    assert [(m["toolName"], m["content"][0]["text"]) for m in tool_results] == [
        (name, text) for name, text, _ in results
    ]


class LostAfterReading(Interceptor):
    """Fails the first model call whose answer's reads ran, once they are parked, as a worker
    lost at that moment would; the file they read changes before the call is retried."""

    def __init__(self) -> None:
        self.changes: list[Path] = []
        self.lost = 0

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        outer = self

        class _Lose(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                result = await super().execute_activity(input)
                if activity.info().activity_type == "call_llm" and result.early_results and not outer.lost:
                    outer.lost += 1
                    for path in outer.changes:
                        path.write_text("two\n")
                    raise ApplicationError("the worker was lost")
                return result

        return _Lose(next)


async def test_a_model_call_retried_after_its_reads_gives_what_they_read_and_writes_it_once(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "early-read-retried",
        [{"tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}]}, {"text": "It says one."}],
    )
    queue = unique_queue()
    lose = LostAfterReading()
    async with running_worker(temporal_client, tmp_path / "sessions", queue, activity_hook=lose):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "early-read-retried"),
            task_queue=queue,
            tools=["read"],
        )
        target = Path(s.config.cwd) / "a.txt"
        target.write_text("one\n")
        lose.changes.append(target)
        await s.prompt("What does a.txt say?")
        events = await s.run_to_idle()

    assert lose.lost == 1 and target.read_text() == "two\n"
    # The retry found the result the lost attempt had parked: the events, the model and the
    # session file all have what the read saw, and the file has it once.
    shown = [
        e["message"]["content"][0]["text"]
        for e in events
        if e["type"] == "message_end" and e["message"]["role"] == "toolResult"
    ]
    assert shown == ["one\n"]
    entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()]
    assert_single_chain(entries)
    stored = [e["message"] for e in entries if e.get("message", {}).get("role") == "toolResult"]
    assert [m["content"][0]["text"] for m in stored] == ["one\n"]
    answers = [
        e["message"] for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant"
    ]
    assert [b.get("text") for b in answers[-1]["content"]] == ["It says one."]


def _answer(*names: str, stop: str = "toolUse") -> AssistantMessage:
    calls = [ToolCall(id=f"c{i}", name=name, arguments={"path": "a.txt"}) for i, name in enumerate(names)]
    return AssistantMessage.model_validate(
        {
            "content": [c.to_json_dict() for c in calls],
            "api": "openai-completions",
            "provider": "p",
            "model": "m",
            "stopReason": stop,
            "timestamp": 0,
        }
    )


def _call_input(ids: int, tools: list[str]) -> LlmCallInput:
    return LlmCallInput(
        file=SessionFileRef(session_id="s", session_path="/nowhere/s.jsonl", cwd="/nowhere"),
        leaf_id=None,
        entry_id="answer",
        entry_timestamp="2026-12-07T00:00:00.000Z",
        model=ModelSpec(id="m", name="m", api="openai-completions", provider="p", base_url="http://x"),
        thinking_level="off",
        system_prompt="",
        tools=tools,
        early_read_ids=[f"id{i}" for i in range(ids)],
    )


def test_only_an_answer_made_of_reads_the_session_has_runs_early_and_only_with_an_id_for_each() -> None:
    tools = ["read", "ls", "bash"]
    assert [c.name for c in early_calls(_answer("read", "ls"), _call_input(4, tools))] == ["read", "ls"]
    assert early_calls(_answer("read", "bash"), _call_input(4, tools)) == []  # a command among them
    assert early_calls(_answer("read", "read", "read"), _call_input(2, tools)) == []  # more calls than ids
    assert early_calls(_answer("read"), _call_input(0, tools)) == []  # the workflow asked for none
    assert early_calls(_answer("ls"), _call_input(4, ["read"])) == []  # a tool the session lacks
    assert early_calls(_answer("read", stop="aborted"), _call_input(4, tools)) == []
    assert early_calls(_answer("read", stop="error"), _call_input(4, tools)) == []
