"""Runs one assistant message's tool calls, as pi does: prepared in source order, then run
in parallel (calls changing one file keep their order) or one by one (a queued user
message skips the rest). Each call runs on its route."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import ToolCall, ToolResultMessage
    from tempi.agent.tool_specs import mutated_path
    from tempi.workflows.session.texts import ABORTED_TEXT, SKIPPED_TEXT, synthetic_result, tool_output
    from tempi.workflows.session.tool_routes import RouteResult, ToolRoute, ToolRoutes, ToolSlot
    from tempi.workflows.session_types import SessionConfig


class ToolHost(Protocol):
    """What the scheduler needs from the session around it."""

    def emit(self, event: dict[str, Any]) -> int: ...

    def emit_live(self, event: dict[str, Any], key: str) -> None:
        """Emit an event whose item streams partial updates under `key` until it ends."""
        ...

    def now_ms(self) -> int: ...

    def abort_requested(self) -> bool: ...

    def has_steering(self) -> bool: ...


class ToolScheduler:
    def __init__(self, config: SessionConfig, host: ToolHost, routes: ToolRoutes) -> None:
        self.config = config
        self.host = host
        self.routes = routes

    async def run(self, calls: list[ToolCall], slots: list[ToolSlot]) -> list[RouteResult]:
        results: list[RouteResult | None] = [None] * len(calls)
        runnable: list[int] = []
        # A call to a tool this session lacks is answered at once; the rest then run.
        for i, call in enumerate(calls):
            self.host.emit_live(
                {
                    "type": "tool_execution_start",
                    "toolCallId": call.id,
                    "toolName": call.name,
                    "args": call.arguments,
                    "_live": call.id,
                },
                call.id,
            )
            if call.name not in self.config.tools and not self.routes.brings(call.name):
                available = ", ".join(self.config.tools) or "none"
                results[i] = self._answer(call, f"Unknown tool {call.name!r}. Available tools: {available}.")
            else:
                runnable.append(i)

        used = {self.routes.route_for(calls[i].name) for i in runnable}
        unavailable: dict[ToolRoute, str] = {}
        for route in self.routes.in_order():
            if route in used and (reason := await route.prepare()) is not None:
                unavailable[route] = reason

        async def run_one(i: int) -> None:
            call = calls[i]
            route = self.routes.route_for(call.name)
            if route in unavailable:
                results[i] = self._answer(call, unavailable[route])
                return
            results[i] = await route.run(call, slots[i])
            self._announce_end(call, results[i].message)  # type: ignore[union-attr]

        if self.config.tool_execution == "sequential":
            for i in runnable:
                if self.host.has_steering() or self.host.abort_requested():
                    results[i] = self._answer(
                        calls[i], ABORTED_TEXT if self.host.abort_requested() else SKIPPED_TEXT
                    )
                    continue
                await run_one(i)
        else:
            last_for_path: dict[str, asyncio.Future[None]] = {}
            tasks: list[asyncio.Future[None]] = []
            # Task creation order is command order in history: keep it the source order.
            for i in runnable:
                path = mutated_path(calls[i].name, calls[i].arguments)
                before = last_for_path.get(path) if path else None
                task = asyncio.ensure_future(_after(before, functools.partial(run_one, i)))
                if path:
                    last_for_path[path] = task
                tasks.append(task)
            await asyncio.gather(*tasks)
        done = [r for r in results if r is not None]
        assert len(done) == len(calls), "every call gets exactly one result"
        return done

    def _answer(self, call: ToolCall, text: str) -> RouteResult:
        """A call that does not run gets an error result at once."""
        message = synthetic_result(call, text, self.host.now_ms())
        self._announce_end(call, message)
        return RouteResult(message)

    def _announce_end(self, call: ToolCall, message: ToolResultMessage) -> None:
        self.host.emit(
            {
                "type": "tool_execution_end",
                "toolCallId": call.id,
                "toolName": call.name,
                "result": tool_output(message),
                "isError": message.is_error,
            }
        )


async def _after(before: asyncio.Future[None] | None, fn: Callable[[], Awaitable[None]]) -> None:
    if before is not None:
        await asyncio.wait([before])
    await fn()
