"""A tool run by one activity, as MCP and extension tools are: its retry follows the effect
it declares, and a failure becomes the result the model reads, never a failed session."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import ToolCall
    from tempi.agent.tools.definition import ToolEffect
    from tempi.workflows.activity_payloads import ToolCallResult
    from tempi.workflows.session.activity_errors import tool_failure_text
    from tempi.workflows.session.activity_options import Activities, ActivityOptions
    from tempi.workflows.session.entries import now_ms
    from tempi.workflows.session.run_control import RunControl
    from tempi.workflows.session.texts import ABORTED_TEXT, synthetic_result
    from tempi.workflows.session.tool_routes import RouteResult


def failed_result(call: ToolCall, text: str) -> RouteResult:
    return RouteResult(synthetic_result(call, text, now_ms()))


async def run_tool_activity(
    call: ToolCall,
    control: RunControl,
    activities: Activities,
    name: str,
    inp: Any,
    options: ActivityOptions,
    *,
    effect: ToolEffect,
    lost_text: str,
    failure: str,
    task_queue: str | None = None,
) -> RouteResult:
    """Run the tool's activity (abortable); `lost_text` is what the model reads when a tool
    that may not run twice lost its worker, `failure` what starts any other error's text."""
    task = asyncio.ensure_future(
        activities.execute(name, inp, ToolCallResult, task_queue=task_queue, options=options)
    )
    try:
        result: ToolCallResult = await control.track(task)
    except (ActivityError, CancelledError, asyncio.CancelledError) as err:
        if control.abort_requested:
            return failed_result(call, ABORTED_TEXT)
        return failed_result(call, tool_failure_text(err, effect, lost=lost_text, failure=failure))
    return RouteResult(result.message, parked=True, effects=result.effects)
