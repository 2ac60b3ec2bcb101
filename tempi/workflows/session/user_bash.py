"""Commands the user runs (`!cmd`, RPC `bash`): their output joins the context as a
bashExecution message, after the current run if one is going."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from tempi.workflows import activity_names as act
    from tempi.workflows.activity_payloads import BashRequest, BashResult, UserBashInput
    from tempi.workflows.session.activity_errors import cause
    from tempi.workflows.session.activity_options import Activities
    from tempi.workflows.session.entries import EntryWriter, now_ms
    from tempi.workflows.session.run_control import RunControl
    from tempi.workflows.session.sandbox_lease import SandboxLease
    from tempi.workflows.session.texts import sandbox_unavailable
    from tempi.workflows.session_types import CarriedState


class UserBash:
    def __init__(
        self,
        state: CarriedState,
        entries: EntryWriter,
        sandbox: SandboxLease,
        control: RunControl,
        activities: Activities,
    ) -> None:
        self.state = state
        self.entries = entries
        self.sandbox = sandbox
        self.control = control
        self.activities = activities
        self.running: asyncio.Future[Any] | None = None
        # Results that arrive during a run join the tree when the run ends.
        self.deferred: list[dict[str, Any]] = []

    async def run(self, req: BashRequest) -> BashResult:
        try:
            queue = await self.sandbox.queue()
        except ActivityError as err:
            raise ApplicationError(
                sandbox_unavailable(self.sandbox.unavailable(err), self.sandbox.user_container()),
                non_retryable=True,
            ) from err
        self.running = asyncio.ensure_future(
            self.activities.execute(
                act.RUN_USER_BASH,
                UserBashInput(file=self.entries.file(), command=req.command),
                BashResult,
                task_queue=queue,
            )
        )
        try:
            result: BashResult = await self.running
        except (ActivityError, CancelledError, asyncio.CancelledError) as err:
            result = BashResult(
                output=f"The command did not finish: {cause(err)}", exit_code=None, cancelled=True
            )
        finally:
            self.running = None
        message: dict[str, Any] = {
            "role": "bashExecution",
            "command": req.command,
            "output": result.output,
            "exitCode": result.exit_code,
            "cancelled": result.cancelled,
            "truncated": result.truncated,
            "timestamp": now_ms(),
        }
        if result.full_output_path:
            message["fullOutputPath"] = result.full_output_path
        if req.exclude_from_context:
            message["excludeFromContext"] = True
        body = {"type": "message", "message": message}
        if self.control.streaming:
            self.deferred.append(body)
        else:
            self.entries.record(body)
            self.state.message_count += 1
        return result

    def abort(self) -> None:
        if self.running is not None:
            self.running.cancel()

    def record_deferred(self) -> None:
        for body in self.deferred:
            self.entries.record(body)
        self.deferred = []
