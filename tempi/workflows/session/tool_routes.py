"""Tool routes: how a tool call runs. The builtin route runs the `run_tool` activity, the
task route starts subagents; tools from extensions or MCP servers get routes of their own
through `ToolRoutes.register`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import ToolCall, ToolResultMessage
    from tempi.extensions.models import ExtensionEffects
    from tempi.workflows.activity_payloads import ToolCallResult


@dataclass(frozen=True)
class ToolSlot:
    """Where a call's result goes in the session tree, and the result when the model call's
    activity already ran the call (an answer's reads, tempi/activities/early_reads.py)."""

    entry_id: str
    parent_id: str
    early: ToolCallResult | None = None


@dataclass(frozen=True)
class RouteResult:
    message: ToolResultMessage
    # The activity stored the result itself, so only a reference crosses history.
    parked: bool = False
    effects: ExtensionEffects | None = None  # what extension code asked of the session


class ToolRoute(Protocol):
    def handles(self, tool_name: str) -> bool: ...

    async def prepare(self) -> str | None:
        """Get ready for a batch that has calls on this route; returns why none of them
        can run, if so."""
        ...

    async def run(self, call: ToolCall, slot: ToolSlot) -> RouteResult: ...


class ToolRoutes:
    """The first registered route that handles a tool runs it; the builtin route runs the rest."""

    def __init__(self, builtin: ToolRoute) -> None:
        self.builtin = builtin
        self.registered: list[ToolRoute] = []
        # Routes whose tools come from outside the session's tool list (MCP servers).
        self.own_tools: list[ToolRoute] = []

    def register(self, route: ToolRoute, *, own_tools: bool = False) -> None:
        """`own_tools`: the route's tools are the session's even though `tools` does not name
        them (it handles exactly the tools it brings)."""
        self.registered.append(route)
        if own_tools:
            self.own_tools.append(route)

    def brings(self, tool_name: str) -> bool:
        return any(r.handles(tool_name) for r in self.own_tools)

    def route_for(self, tool_name: str) -> ToolRoute:
        return next((r for r in self.registered if r.handles(tool_name)), self.builtin)

    def builtin_runs(self, tool_name: str) -> bool:
        return self.route_for(tool_name) is self.builtin

    def in_order(self) -> list[ToolRoute]:
        """Routes in the order a batch prepares them (a command order in history)."""
        return [self.builtin, *self.registered]
