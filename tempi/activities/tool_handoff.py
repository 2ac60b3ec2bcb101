"""Tools that start inside the workflow task and, when they run long, go on under an
activity on the worker's own queue.

A tool run as a regular activity costs its turn a second server round trip. Run as a local
activity it costs none, but the workflow then hears nothing (an abort included) until the
activity ends. So bash, grep and find start as a local activity that waits `BRIEF_S`
(TEMPI_BRIEF_TOOL_SECONDS) for them: most end in that time and their turn pays one round
trip, as a read's does. One that is still running is left running on this worker and
awaited by `await_tool` on a queue only this worker process polls, where heartbeats deliver
an abort as they do for any tool.

A command runs at most once: it leaves a durable mark beside the session file before it
starts, and a run of the same workflow task after a lost worker finds the mark and answers
that the command may or may not have completed, as a lost `run_tool` activity does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Awaitable
from pathlib import Path

from temporalio import activity

from tempi.activities.metrics import record_tool_call
from tempi.activities.out_of_space import out_of_space_is_final
from tempi.activities.parked_results import find_parked, for_history, park_result
from tempi.activities.session_activities import SessionActivities
from tempi.activities.spans import tool_span, traced_tool_call
from tempi.activities.tool_runs import RunningTool
from tempi.agent.messages import ToolResultMessage
from tempi.agent.tool_specs import tool_effect
from tempi.store.appends import fsync_dir
from tempi.store.modes import create_private_file, make_private_dirs
from tempi.store.sidecar import started_path
from tempi.workflows import activity_names as names
from tempi.workflows.activity_payloads import BriefToolRun, ToolCallInput, ToolCallResult
from tempi.workflows.session.texts import LOST_BASH_TEXT, synthetic_result

# Long enough for `ls`, `git status` or a grep of a project; an abort sent meanwhile waits
# at most this long (the workflow hears it once the local activity returns).
BRIEF_S = 0.25
BRIEF_ENV = "TEMPI_BRIEF_TOOL_SECONDS"
# A handed-off call nobody came for (the workflow aborted before `await_tool` started) is
# stopped after this long, so nothing runs on unattended.
UNCLAIMED_S = 120.0


def own_queue(task_queue: str) -> str:
    """A queue no other worker process polls."""
    return f"{task_queue}-worker-{uuid.uuid4().hex[:12]}"


class ToolHandoff:
    """`run_tool_briefly` (a local activity on the main queue) and `await_tool` (on `queue`,
    this process's own). Without a queue a call runs to its end in the local activity."""

    def __init__(self, tools: SessionActivities, queue: str | None) -> None:
        self.tools = tools
        self.queue = queue
        self.brief_s = float(os.environ.get(BRIEF_ENV) or BRIEF_S)
        self.running: dict[str, RunningTool] = {}

    @activity.defn(name=names.RUN_TOOL_BRIEFLY)
    async def run_tool_briefly(self, inp: ToolCallInput) -> BriefToolRun:
        with out_of_space_is_final(inp.file.session_path), tool_span(inp.tool_call.name) as span:
            brief = await self._run_briefly(inp)
            if brief.result is not None:
                span.set_attribute("tempi.tool.is_error", brief.result.message.is_error)
                record_tool_call(inp.tool_call.name, brief.result.message.is_error)
            return brief

    @activity.defn(name=names.AWAIT_TOOL)
    async def await_tool(self, inp: ToolCallInput) -> ToolCallResult:
        with out_of_space_is_final(inp.file.session_path):
            return await traced_tool_call(inp.tool_call.name, self._await(inp))

    @activity.defn(name=names.STOP_TOOL)
    async def stop_tool(self, inp: ToolCallInput) -> None:
        started = self.running.pop(_key(inp), None)
        if started is not None:
            await started.kill()  # the workflow answers the call itself
            _clear(_mark(inp))

    async def _run_briefly(self, inp: ToolCallInput) -> BriefToolRun:
        parked = find_parked(inp.file, inp.entry_id)
        if parked is not None:
            message = for_history(ToolResultMessage.model_validate(parked["message"]))
            return BriefToolRun(result=ToolCallResult(message=message))
        mark = _mark(inp) if tool_effect(inp.tool_call.name) == "executes" else None
        if mark is not None:
            if mark.exists():
                return BriefToolRun(result=_lost(inp))
            _leave_mark(mark)
        started = await self.tools.start_tool(inp)
        if isinstance(started, ToolCallResult):
            _clear(mark)
            return BriefToolRun(result=started)
        try:
            await asyncio.wait({started.task}, timeout=self.brief_s if self.queue else None)
        except asyncio.CancelledError:  # this worker is stopping
            return BriefToolRun(result=await _ended(started.stop(), mark))
        if started.task.done() or self.queue is None or activity.is_worker_shutdown():
            # A stopping worker no longer polls its own queue: the call ends here, within
            # the grace its shutdown gives running work.
            return BriefToolRun(result=await _ended(self.tools.finish_tool(started), mark))
        key = _key(inp)
        self.running[key] = started
        asyncio.get_running_loop().call_later(UNCLAIMED_S, self._stop_unclaimed, key, started, mark)
        return BriefToolRun(running_on=self.queue)

    async def _await(self, inp: ToolCallInput) -> ToolCallResult:
        started = self.running.pop(_key(inp), None)
        mark = _mark(inp) if tool_effect(inp.tool_call.name) == "executes" else None
        if started is None:
            if mark is None:
                return await self.tools.run_tool(inp)  # a read runs again safely
            return _lost(inp)
        return await _ended(self.tools.finish_tool(started), mark)

    def _stop_unclaimed(self, key: str, started: RunningTool, mark: Path | None) -> None:
        if self.running.get(key) is started:
            del self.running[key]
            killing = asyncio.ensure_future(started.kill())
            killing.add_done_callback(lambda _: _clear(mark))


async def _ended(finishing: Awaitable[ToolCallResult], mark: Path | None) -> ToolCallResult:
    """The call's parked result; its start mark goes once the result is parked."""
    result = await finishing
    _clear(mark)
    return result


def _key(inp: ToolCallInput) -> str:
    return f"{inp.file.session_id}/{inp.entry_id}"


def _mark(inp: ToolCallInput) -> Path:
    return started_path(inp.file.session_path, inp.file.session_id, inp.entry_id)


def _leave_mark(mark: Path) -> None:
    """Durable before the command starts: a machine that loses power mid-command must still
    find it when the workflow task runs again. The mark is empty, so its folder's entry is
    all there is to sync."""
    make_private_dirs(mark.parent)
    os.close(create_private_file(mark, os.O_WRONLY))
    fsync_dir(mark.parent)


def _clear(mark: Path | None) -> None:
    if mark is not None:
        with contextlib.suppress(FileNotFoundError):
            mark.unlink()


def _lost(inp: ToolCallInput) -> ToolCallResult:
    return park_result(inp, synthetic_result(inp.tool_call, LOST_BASH_TEXT, inp.timestamp_ms), None)
