"""The one table of activity options. Every value here is part of running histories'
commands (timeouts, retries, queues), so change none of them without a patch."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from tempi.agent.tools.definition import ToolEffect
    from tempi.workflows import activity_names as act

LLM_TIMEOUT = timedelta(minutes=15)
LLM_HEARTBEAT = timedelta(seconds=10)
TOOL_TIMEOUT = timedelta(hours=12)
TOOL_HEARTBEAT = timedelta(seconds=10)
STORE_TIMEOUT = timedelta(minutes=1)
# The activity retry below covers lost workers and store hiccups; provider errors come
# back as messages and follow pi's visible retry policy instead.
INFRA_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10), maximum_attempts=30
)
# A command that may have run must not run twice behind the user's back.
RUN_ONCE = RetryPolicy(maximum_attempts=1)
WAIT_CANCELLED = workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
TRY_CANCEL = workflow.ActivityCancellationType.TRY_CANCEL


@dataclass(frozen=True)
class ActivityOptions:
    start_to_close: timedelta
    retry: RetryPolicy
    heartbeat: timedelta | None = None
    cancellation: workflow.ActivityCancellationType = TRY_CANCEL


ACTIVITY_OPTIONS: dict[str, ActivityOptions] = {
    act.CALL_LLM: ActivityOptions(LLM_TIMEOUT, INFRA_RETRY, LLM_HEARTBEAT, WAIT_CANCELLED),
    act.COMPACT: ActivityOptions(LLM_TIMEOUT, INFRA_RETRY, LLM_HEARTBEAT, WAIT_CANCELLED),
    act.SUMMARIZE_BRANCH: ActivityOptions(LLM_TIMEOUT, INFRA_RETRY, LLM_HEARTBEAT),
    act.RUN_TOOL: ActivityOptions(TOOL_TIMEOUT, INFRA_RETRY, TOOL_HEARTBEAT, WAIT_CANCELLED),
    # Kills a handed-off tool whose awaiting activity an abort cancelled before it started.
    act.STOP_TOOL: ActivityOptions(timedelta(minutes=1), INFRA_RETRY),
    act.RUN_USER_BASH: ActivityOptions(TOOL_TIMEOUT, RUN_ONCE, TOOL_HEARTBEAT, WAIT_CANCELLED),
    act.FLUSH_ENTRIES: ActivityOptions(STORE_TIMEOUT, INFRA_RETRY),
    # Listing starts each server once; a server that does not answer is reported, not retried.
    act.LIST_MCP_TOOLS: ActivityOptions(timedelta(minutes=2), INFRA_RETRY),
    act.CALL_MCP_TOOL: ActivityOptions(TOOL_TIMEOUT, INFRA_RETRY, TOOL_HEARTBEAT, WAIT_CANCELLED),
    # Loading runs the extensions' factories: code tempi did not write, so a short bound.
    act.LOAD_EXTENSIONS: ActivityOptions(timedelta(minutes=2), INFRA_RETRY),
    act.EXTENSIONS_BEFORE_AGENT_START: ActivityOptions(timedelta(minutes=2), INFRA_RETRY),
    act.EXTENSIONS_AGENT_END: ActivityOptions(timedelta(minutes=2), INFRA_RETRY),
    act.CALL_EXTENSION_TOOL: ActivityOptions(TOOL_TIMEOUT, INFRA_RETRY, TOOL_HEARTBEAT, WAIT_CANCELLED),
    act.CREATE_SANDBOX: ActivityOptions(
        timedelta(minutes=5), RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=2))
    ),
    act.FINISH_SANDBOX: ActivityOptions(timedelta(minutes=2), RetryPolicy(maximum_attempts=3)),
}

TOOL_RETRY: dict[ToolEffect, RetryPolicy] = {
    "reads": INFRA_RETRY,
    "writes": INFRA_RETRY,
    "executes": RUN_ONCE,
}


def tool_options(effect: ToolEffect) -> ActivityOptions:
    return replace(ACTIVITY_OPTIONS[act.RUN_TOOL], retry=TOOL_RETRY[effect])


def mcp_tool_options(effect: ToolEffect) -> ActivityOptions:
    return replace(ACTIVITY_OPTIONS[act.CALL_MCP_TOOL], retry=TOOL_RETRY[effect])


def extension_tool_options(effect: ToolEffect) -> ActivityOptions:
    return replace(ACTIVITY_OPTIONS[act.CALL_EXTENSION_TOOL], retry=TOOL_RETRY[effect])


class Activities:
    """Starts activities with the table's options. A call on a sandbox host's queue gets a
    pickup timeout, because a host that is gone never picks the task up."""

    def __init__(self, sandbox_pickup_s: float) -> None:
        self.pickup = timedelta(seconds=sandbox_pickup_s)

    def execute(
        self,
        name: str,
        arg: Any,
        result_type: type | None = None,
        *,
        task_queue: str | None = None,
        options: ActivityOptions | None = None,
    ) -> Awaitable[Any]:
        opts = options or ACTIVITY_OPTIONS[name]
        return workflow.execute_activity(
            name,
            arg,
            result_type=result_type,
            task_queue=task_queue,
            schedule_to_start_timeout=self.pickup if task_queue else None,
            start_to_close_timeout=opts.start_to_close,
            heartbeat_timeout=opts.heartbeat,
            retry_policy=opts.retry,
            cancellation_type=opts.cancellation,
        )

    def execute_local(
        self, name: str, arg: Any, result_type: type | None = None, *, options: ActivityOptions | None = None
    ) -> Awaitable[Any]:
        """The activity on the worker that runs this workflow task, recorded as a marker: no
        server round trip to schedule it, none to hand its result back."""
        opts = options or ACTIVITY_OPTIONS[name]
        return workflow.execute_local_activity(
            name,
            arg,
            result_type=result_type,
            start_to_close_timeout=opts.start_to_close,
            retry_policy=opts.retry,
            cancellation_type=opts.cancellation,
        )
