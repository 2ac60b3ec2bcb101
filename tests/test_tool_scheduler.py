"""The tool scheduler in plain asyncio: which route runs a call, what a route that cannot
start says, and the order in which writes to one file land."""

from __future__ import annotations

import asyncio
from typing import Any

from tempi.agent.mcp_tools import McpTool
from tempi.agent.messages import TextContent, ToolCall, ToolResultMessage
from tempi.agent.model_spec import ModelSpec
from tempi.agent.tool_specs import tool_effect
from tempi.workflows.session.activity_options import INFRA_RETRY, RUN_ONCE, mcp_tool_options, tool_options
from tempi.workflows.session.tool_routes import RouteResult, ToolRoutes, ToolSlot
from tempi.workflows.session.tool_scheduler import ToolScheduler
from tempi.workflows.session_types import SessionConfig

MODEL = ModelSpec(id="m", api="faux", provider="test")


class Host:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.steering = False
        self.aborted = False

    def emit(self, event: dict[str, Any]) -> int:
        self.events.append(event)
        return len(self.events) - 1

    def emit_live(self, event: dict[str, Any], key: str) -> None:
        self.emit(event)

    def now_ms(self) -> int:
        return 1

    def abort_requested(self) -> bool:
        return self.aborted

    def has_steering(self) -> bool:
        return self.steering


class RecordingRoute:
    """Runs the tools it handles, noting when each starts and ends; a call sleeps for
    its `ms` argument so calls overlap the way real ones do."""

    def __init__(self, name: str, tools: set[str] | None = None, unavailable: str | None = None) -> None:
        self.name = name
        self.tools = tools
        self.unavailable = unavailable
        self.log: list[str] = []

    def handles(self, tool_name: str) -> bool:
        return self.tools is None or tool_name in self.tools

    async def prepare(self) -> str | None:
        return self.unavailable

    async def run(self, call: ToolCall, slot: ToolSlot) -> RouteResult:
        self.log.append(f"start {call.id}")
        await asyncio.sleep(call.arguments.get("ms", 0) / 1000)
        self.log.append(f"end {call.id}")
        text = f"{self.name} ran {call.id}"
        return RouteResult(
            ToolResultMessage(
                tool_call_id=call.id, tool_name=call.name, content=[TextContent(text=text)], timestamp=1
            )
        )


def scheduler(routes: ToolRoutes, tools: list[str], host: Host | None = None) -> ToolScheduler:
    config = SessionConfig(session_id="s", session_path="/s.jsonl", cwd="/", model=MODEL, tools=tools)
    return ToolScheduler(config, host or Host(), routes)


def slots(n: int) -> list[ToolSlot]:
    return [ToolSlot(entry_id=f"e{i}", parent_id=f"p{i}") for i in range(n)]


def text(result: RouteResult) -> str:
    return result.message.text()


async def test_writes_to_one_file_keep_their_order_while_other_calls_run_alongside() -> None:
    builtin = RecordingRoute("builtin")
    calls = [
        ToolCall(id="w1", name="write", arguments={"path": "a.txt", "content": "1", "ms": 30}),
        ToolCall(id="r", name="read", arguments={"path": "b.txt", "ms": 5}),
        ToolCall(id="w2", name="edit", arguments={"path": "./a.txt", "edits": [], "ms": 0}),
    ]
    results = await scheduler(ToolRoutes(builtin), ["read", "write", "edit"]).run(calls, slots(3))

    assert [text(r) for r in results] == ["builtin ran w1", "builtin ran r", "builtin ran w2"]
    # The read did not wait for the slow write; the edit of the same file did.
    assert builtin.log.index("start r") < builtin.log.index("end w1") < builtin.log.index("start w2")


async def test_a_registered_route_runs_its_tools_and_the_builtin_route_the_rest() -> None:
    builtin, mcp = RecordingRoute("builtin"), RecordingRoute("mcp", tools={"mcp_search"})
    routes = ToolRoutes(builtin)
    routes.register(mcp)
    calls = [ToolCall(id="a", name="mcp_search"), ToolCall(id="b", name="read", arguments={"path": "x"})]
    results = await scheduler(routes, ["read", "mcp_search"]).run(calls, slots(2))

    assert [text(r) for r in results] == ["mcp ran a", "builtin ran b"]


async def test_a_route_that_cannot_start_answers_its_calls_and_the_others_still_run() -> None:
    builtin = RecordingRoute("builtin", unavailable="Could not start the docker sandbox: no engine")
    task = RecordingRoute("task", tools={"task"})
    routes = ToolRoutes(builtin)
    routes.register(task)
    host = Host()
    calls = [ToolCall(id="a", name="bash", arguments={"command": "ls"}), ToolCall(id="b", name="task")]
    results = await scheduler(routes, ["bash", "task"], host).run(calls, slots(2))

    assert [text(r) for r in results] == ["Could not start the docker sandbox: no engine", "task ran b"]
    assert [r.message.is_error for r in results] == [True, False]
    assert builtin.log == []
    ends = [e for e in host.events if e["type"] == "tool_execution_end"]
    assert [(e["toolCallId"], e["isError"]) for e in ends] == [("a", True), ("b", False)]


def test_only_calls_that_run_commands_are_never_retried() -> None:
    assert tool_options(tool_effect("bash")).retry == RUN_ONCE
    assert tool_options(tool_effect("task")).retry == RUN_ONCE
    assert tool_options(tool_effect("read")).retry == tool_options(tool_effect("edit")).retry == INFRA_RETRY


async def test_mcp_tools_run_on_their_route_without_being_named_in_the_tool_list() -> None:
    builtin, mcp = RecordingRoute("builtin"), RecordingRoute("mcp", tools={"mcp__docs__search"})
    routes = ToolRoutes(builtin)
    routes.register(mcp, own_tools=True)
    calls = [ToolCall(id="a", name="mcp__docs__search"), ToolCall(id="b", name="mcp__docs__gone")]
    results = await scheduler(routes, ["read"]).run(calls, slots(2))

    assert text(results[0]) == "mcp ran a"
    assert results[1].message.is_error and "Unknown tool 'mcp__docs__gone'" in text(results[1])


def test_mcp_tools_retry_only_when_their_server_marks_them_read_only_or_idempotent() -> None:
    def retry(**hints: bool) -> object:
        tool = McpTool(name="mcp__s__t", server="s", tool="t", **hints)
        return mcp_tool_options(tool.effect).retry

    assert retry(read_only=True) == INFRA_RETRY
    assert retry(idempotent=True) == INFRA_RETRY
    assert retry() == RUN_ONCE
