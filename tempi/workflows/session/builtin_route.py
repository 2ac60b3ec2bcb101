"""The builtin tool route: a call runs as the `run_tool` activity, on the sandbox host's
queue when the session has a docker sandbox."""

from __future__ import annotations

import asyncio
import contextlib

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import ToolCall
    from tempi.agent.session_entries import iso_timestamp
    from tempi.agent.tool_specs import tool_effect
    from tempi.agent.tools.definition import ToolEffect
    from tempi.workflows import activity_names as act
    from tempi.workflows.activity_payloads import BriefToolRun, ToolCallInput, ToolCallResult
    from tempi.workflows.session.activity_errors import never_started, tool_failure_text
    from tempi.workflows.session.activity_options import Activities, tool_options
    from tempi.workflows.session.entries import EntryWriter, now_ms
    from tempi.workflows.session.extension_route import ExtensionTools
    from tempi.workflows.session.run_control import RunControl
    from tempi.workflows.session.sandbox_lease import SandboxLease
    from tempi.workflows.session.texts import (
        ABORTED_TEXT,
        LOST_BASH_TEXT,
        sandbox_host_gone,
        sandbox_unavailable,
        synthetic_result,
    )
    from tempi.workflows.session.tool_routes import RouteResult, ToolSlot
    from tempi.workflows.session_types import SessionConfig

# read, write, edit and ls on the session's own worker run as local activities: a turn then
# pays one server round trip, for the model call, instead of two. After a lost worker they
# run again as activities do: reads change nothing, a write writes the same content, the
# edit journal knows an edit it applied, and a parked result is reused. A local activity
# hears an abort only when its workflow task does (the SDK renews that task every 8 s), so
# what can run long stays an activity that heartbeats: grep and find over a large tree,
# bash (also run at most once), and every call on a sandbox host's queue.
LOCAL_FILE_TOOLS = "local-file-tools"
LOCAL_TOOLS = frozenset({"read", "write", "edit", "ls"})
# A local activity's failure reaches the workflow as the activity's own error, where a
# regular activity's comes wrapped in an ActivityError. Before this patch a local tool that
# failed for good (a full disk while parking its result) failed the whole session; now it is
# a tool result the model reads, as any other tool's failure is.
LOCAL_TOOL_FAILURE_IS_A_RESULT = "local-tool-failure-is-a-result"
# bash, grep and find on the session's own worker start as a local activity too, and only a
# call still running after a moment is awaited by an activity (on its worker's own queue, so
# an abort reaches it by heartbeat): most end in that moment, and their turn then pays one
# round trip instead of two. A bash command still runs at most once (a mark left as it
# starts; tempi/activities/tool_handoff.py).
BRIEF_TOOLS_PATCH = "brief-tools-in-the-workflow-task"
BRIEF_TOOLS = frozenset({"bash", "grep", "find"})


class BuiltinToolRoute:
    def __init__(
        self,
        config: SessionConfig,
        control: RunControl,
        entries: EntryWriter,
        sandbox: SandboxLease,
        activities: Activities,
        extensions: ExtensionTools | None = None,
    ) -> None:
        self.config = config
        self.extensions = extensions
        self.control = control
        self.entries = entries
        self.sandbox = sandbox
        self.activities = activities
        self.queue: str | None = None

    def handles(self, tool_name: str) -> bool:
        return True

    async def prepare(self) -> str | None:
        self.queue = None
        try:
            self.queue = await self.sandbox.queue()
        except ActivityError as err:
            return sandbox_unavailable(self.sandbox.unavailable(err), self.sandbox.user_container())
        return None

    async def run(self, call: ToolCall, slot: ToolSlot) -> RouteResult:
        if self.control.abort_requested:
            return self._failed(call, ABORTED_TEXT)
        if slot.early is not None:
            return self._routed(slot.early)
        started_ms = now_ms()
        inp = ToolCallInput(
            file=self.entries.file(),
            tool_call=call,
            entry_id=slot.entry_id,
            parent_id=slot.parent_id,
            entry_timestamp=iso_timestamp(started_ms),
            timestamp_ms=started_ms,
            extensions=self.extensions.active() if self.extensions is not None else [],
        )
        effect = tool_effect(call.name)
        queue = self.queue
        if queue is None and call.name in LOCAL_TOOLS and workflow.patched(LOCAL_FILE_TOOLS):
            run = self.activities.execute_local(
                act.RUN_TOOL, inp, ToolCallResult, options=tool_options(effect)
            )
        elif queue is None and call.name in BRIEF_TOOLS and workflow.patched(BRIEF_TOOLS_PATCH):
            return await self._run_briefly(call, inp, effect)
        else:
            run = self.activities.execute(
                act.RUN_TOOL, inp, ToolCallResult, task_queue=queue, options=tool_options(effect)
            )
        try:
            result: ToolCallResult = await self.control.track(asyncio.ensure_future(run))
        except (ActivityError, CancelledError, asyncio.CancelledError) as err:
            if self.control.abort_requested:
                return self._failed(call, ABORTED_TEXT)
            if queue and never_started(err):
                self.sandbox.forget()
                return self._failed(
                    call, sandbox_host_gone(self.config.sandbox_pickup_s, self.sandbox.user_container())
                )
            return self._failed(call, self._failure_text(err, effect))
        except FailureError as err:
            if not workflow.patched(LOCAL_TOOL_FAILURE_IS_A_RESULT):
                raise
            return self._failed(call, self._failure_text(err, effect))
        return self._routed(result)

    async def _run_briefly(self, call: ToolCall, inp: ToolCallInput, effect: ToolEffect) -> RouteResult:
        """A local activity while the call is brief, then an activity on the queue of the
        worker it runs on (see tempi/activities/tool_handoff.py)."""
        options = tool_options(effect)
        running_on: str | None = None
        try:
            brief: BriefToolRun = await self.control.track(
                asyncio.ensure_future(
                    self.activities.execute_local(act.RUN_TOOL_BRIEFLY, inp, BriefToolRun, options=options)
                )
            )
            if brief.result is not None:
                return self._routed(brief.result)
            running_on = brief.running_on
            assert running_on is not None
            result: ToolCallResult = await self.control.track(
                asyncio.ensure_future(
                    self.activities.execute(
                        act.AWAIT_TOOL, inp, ToolCallResult, task_queue=running_on, options=options
                    )
                )
            )
        except (ActivityError, FailureError, CancelledError, asyncio.CancelledError) as err:
            if self.control.abort_requested:
                if running_on is not None:
                    # The awaiting activity may have been cancelled before it started, which
                    # left the call running on its worker.
                    with contextlib.suppress(ActivityError):
                        await self.activities.execute(act.STOP_TOOL, inp, task_queue=running_on)
                return self._failed(call, ABORTED_TEXT)
            return self._failed(call, self._failure_text(err, effect))
        return self._routed(result)

    def _routed(self, result: ToolCallResult) -> RouteResult:
        if result.sandbox_lost:
            self.sandbox.forget()
            return RouteResult(result.message)
        return RouteResult(result.message, parked=True, effects=result.effects)

    @staticmethod
    def _failure_text(err: BaseException, effect: ToolEffect) -> str:
        return tool_failure_text(err, effect, lost=LOST_BASH_TEXT, failure="The tool failed")

    def _failed(self, call: ToolCall, text: str) -> RouteResult:
        return RouteResult(synthetic_result(call, text, now_ms()))
