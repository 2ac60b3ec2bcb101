"""Running a model's tool call and a user's `!command` where the session's tools act."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path

from temporalio import activity

from tempi.activities.heartbeat import Heartbeater
from tempi.activities.metrics import record_sandbox_failure
from tempi.activities.out_of_space import out_of_space_is_final
from tempi.activities.parked_results import find_parked, for_history, park_result
from tempi.activities.sandbox import WORKSPACE_DIR, SandboxUnavailableError
from tempi.activities.sandbox_policy import check_sandbox, refusal
from tempi.activities.spans import traced_tool_call
from tempi.activities.tools import ExecutionBackend, LocalBackend, ToolContext, execute_tool
from tempi.activities.tools.bash import run_command
from tempi.activities.tools.bwrap_backend import BwrapBackend
from tempi.agent.messages import ToolCall, ToolResultMessage
from tempi.agent.tool_specs import ToolOutcome
from tempi.config.settings import settings_at_call
from tempi.extensions.hooks import context_for, hooked
from tempi.extensions.models import ExtensionEffects
from tempi.store.live_channel import LiveWriter
from tempi.store.sidecar import live_path, sidecar_dir
from tempi.workflows import activity_names as names
from tempi.workflows.activity_payloads import (
    BashResult,
    SessionFileRef,
    ToolCallInput,
    ToolCallResult,
    UserBashInput,
)
from tempi.workflows.session.texts import synthetic_result

WORKER_STOPPED_TOOL_TEXT = (
    "The tempi server stopped while this tool ran, so it was stopped and may not have completed. "
    "Check the workspace state before running it again."
)

ABORT_GRACE_S = 5.0


async def make_backend(ref: SessionFileRef) -> tuple[ExecutionBackend, str]:
    """Where the session's tools act, and their working directory there: this machine, a
    bubblewrap sandbox over the cwd, the session's docker container, or the user's."""
    if ref.sandbox == "container":
        from tempi.activities.sandbox.user_container import open_user_container

        if ref.container_id is None or ref.container_name is None:
            raise SandboxUnavailableError("The session's container was not looked up")
        return await open_user_container(ref.container_id, ref.container_name, ref.cwd)
    if ref.sandbox == "docker":
        if ref.container_id is None:
            raise SandboxUnavailableError("The session's sandbox was not created")
        from tempi.activities.sandbox import open_backend

        return await open_backend(ref.container_id), WORKSPACE_DIR
    if ref.sandbox == "bwrap":
        return BwrapBackend(ref.cwd), ref.cwd
    return LocalBackend(), ref.cwd


def _sandbox_lost(
    call: ToolCall, timestamp_ms: int, err: SandboxUnavailableError, user_container: bool
) -> ToolCallResult:
    if user_container:
        text = f"Cannot run the tool: {err}"
    else:
        text = f"The sandbox is gone ({err}); a fresh one starts with the next tool call. Files changed in it may be lost."
    return ToolCallResult(message=synthetic_result(call, text, timestamp_ms), sandbox_lost=True)


@dataclass
class RunningTool:
    """A tool call running on this worker: the task running it and how to stop it."""

    inp: ToolCallInput
    task: asyncio.Task[tuple[ToolOutcome, ExtensionEffects]]
    abort: asyncio.Event
    live: LiveWriter

    async def kill(self) -> None:
        self.abort.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.task, ABORT_GRACE_S)
        self.live.close()

    async def stop(self) -> ToolCallResult:
        """Kill the call (an abort, or this worker stopping) and park what that says."""
        await self.kill()
        text = WORKER_STOPPED_TOOL_TEXT if activity.is_worker_shutdown() else "Aborted by the user."
        return park_result(self.inp, synthetic_result(self.inp.tool_call, text, self.inp.timestamp_ms), None)

    def conclude(self, outcome: ToolOutcome, effects: ExtensionEffects | None) -> ToolCallResult:
        self.live.close()
        call = self.inp.tool_call
        message = ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=outcome.content,
            details=outcome.details,
            is_error=outcome.is_error,
            timestamp=self.inp.timestamp_ms,
        )
        return park_result(self.inp, message, effects)


class ToolRunActivities:
    """The tool runs of `SessionActivities`."""

    @activity.defn(name=names.RUN_TOOL)
    async def run_tool(self, inp: ToolCallInput) -> ToolCallResult:
        with out_of_space_is_final(inp.file.session_path):
            return await traced_tool_call(inp.tool_call.name, self._run_tool(inp))

    async def _run_tool(self, inp: ToolCallInput) -> ToolCallResult:
        started = await self.start_tool(inp)
        if isinstance(started, ToolCallResult):
            return started
        return await self.finish_tool(started)

    async def start_tool(self, inp: ToolCallInput) -> ToolCallResult | RunningTool:
        """The call's result when it needs no run (parked by an earlier attempt, refused by
        the sandbox policy, its sandbox gone), else the call started on this worker."""
        parked = find_parked(inp.file, inp.entry_id)
        if parked is not None:
            return ToolCallResult(message=for_history(ToolResultMessage.model_validate(parked["message"])))
        call = inp.tool_call
        if (refused := refusal(inp.file.sandbox)) is not None:
            return ToolCallResult(message=synthetic_result(call, refused, inp.timestamp_ms))
        try:
            backend, cwd = await make_backend(inp.file)
        except SandboxUnavailableError as err:
            record_sandbox_failure(inp.file.sandbox)
            return _sandbox_lost(call, inp.timestamp_ms, err, inp.file.sandbox == "container")
        live = LiveWriter(
            live_path(inp.file.session_path, inp.file.session_id, call.id), activity.info().attempt
        )
        abort = asyncio.Event()
        state_dir = sidecar_dir(inp.file.session_path, inp.file.session_id)
        ctx = ToolContext(
            cwd=cwd,
            backend=backend,
            tool_call_id=call.id,
            on_update=lambda partial: live.write({"partialResult": partial.to_json_dict()}),
            abort=abort,
            spill_dir=str(state_dir / "output"),
            state_dir=str(state_dir),
            command_prefix=settings_at_call(Path(inp.file.cwd)).shell_command_prefix
            if call.name == "bash"
            else None,
            host_cwd=inp.file.cwd if inp.file.sandbox in ("docker", "container") else None,
        )
        task = asyncio.create_task(
            hooked(
                inp.extensions, context_for(inp.file), call, lambda args: execute_tool(call.name, args, ctx)
            )
        )
        return RunningTool(inp, task, abort, live)

    async def finish_tool(self, running: RunningTool) -> ToolCallResult:
        """Wait for a started call under heartbeats (an abort arrives in their answer) and
        park its result."""
        try:
            async with Heartbeater():
                outcome, effects = await asyncio.shield(running.task)
        except asyncio.CancelledError:
            return await running.stop()
        except BaseException:
            running.live.close()
            raise
        return running.conclude(outcome, effects)

    @activity.defn(name=names.RUN_USER_BASH)
    async def run_user_bash(self, inp: UserBashInput) -> BashResult:
        check_sandbox(inp.file.sandbox)
        backend, cwd = await make_backend(inp.file)
        ctx = ToolContext(
            cwd=cwd,
            backend=backend,
            abort=asyncio.Event(),
            spill_dir=str(sidecar_dir(inp.file.session_path, inp.file.session_id) / "output"),
        )
        task = asyncio.create_task(run_command(inp.command, ctx))
        try:
            async with Heartbeater():
                run = await asyncio.shield(task)
        except asyncio.CancelledError:
            assert ctx.abort is not None
            ctx.abort.set()
            run = await asyncio.wait_for(task, ABORT_GRACE_S)
        details = run.details or {}
        return BashResult(
            output=run.text,
            exit_code=run.result.exit_code,
            cancelled=run.result.aborted,
            truncated=bool(details),
            full_output_path=details.get("fullOutputPath"),
        )
