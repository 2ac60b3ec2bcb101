"""The console's pipelines: the list, one pipeline's shards, and the operator controls, each
through the same query, updates and signal as `tempi pipeline` (tempi.cli.pipeline_manage).

A pipeline's progress is answered by a worker (the query) or read from its result once it
has finished; a pipeline that failed or was terminated has neither, and shows its status only."""

from __future__ import annotations

import asyncio
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from tempi.cli.export_markdown import render_markdown
from tempi.cli.pipeline_manage import CONTROLS, ControlError, cancel, control, progress_of
from tempi.cli.pipeline_outputs import PipelineOutputs, remembered
from tempi.cli.pipeline_run import failure_cause
from tempi.pipeline.reports import counts, outcome_line, summary_line
from tempi.pipeline.run_types import PIPELINE_WORKFLOW, PipelineProgress, ShardStatus

_WORKFLOW_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$")
# A shard's child workflow (`<pipeline>-shard-<shard id>[-retryN][-again]`), whose session a page follows.
SHARD_CHILD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}-shard-[A-Za-z0-9._:@-]{1,200}$")
_SESSION_FILE = re.compile(r"_([0-9a-fA-F-]{8,})\.jsonl$")
# What follows `<pipeline>-shard-<id>` in a shard's child workflow id (see the pipeline's _child).
_CHILD_SUFFIX = re.compile(r"^(-retry\d+)?(-again)?$")
ACTIONS = (*CONTROLS, "cancel")
_WITH_SHARD = ("retry", "skip")
# The reports a finished pipeline's `tempi pipeline run`/`wait` wrote, offered as downloads.
_DOWNLOADS = {"junit": ("junit", "application/xml"), "json": ("json_path", "application/json")}


async def _progress(
    client: Client, w: WorkflowExecution | WorkflowExecutionDescription
) -> PipelineProgress | None:
    if w.status == WorkflowExecutionStatus.RUNNING:
        try:
            return await progress_of(client, w.id)
        except RPCError:
            return None  # no worker answers the query now: the status still shows
    if w.status == WorkflowExecutionStatus.COMPLETED:
        handle = client.get_workflow_handle(w.id, run_id=w.run_id, result_type=PipelineProgress)
        result: PipelineProgress = await handle.result(follow_runs=False)
        return result
    return None


def _status(w: WorkflowExecution | WorkflowExecutionDescription, progress: PipelineProgress | None) -> str:
    if w.status == WorkflowExecutionStatus.RUNNING:
        return "paused" if progress is not None and progress.paused else "running"
    if w.status == WorkflowExecutionStatus.COMPLETED and progress is not None:
        return outcome_line(progress)
    return w.status.name.lower() if w.status else "unknown"


def _summary(
    w: WorkflowExecution | WorkflowExecutionDescription, progress: PipelineProgress | None, started: datetime
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": w.id,
        "running": w.status == WorkflowExecutionStatus.RUNNING,
        "status": _status(w, progress),
        "started": started.isoformat(),
        "name": None,
        "shards": 0,
        "counts": {},
        "summary": None,
        "cost": None,
    }
    if progress is not None:
        row.update(
            name=progress.name,
            shards=len(progress.shards),
            counts=counts(progress),
            summary=summary_line(progress),
            cost=progress.cost_usd(),
            phase=progress.phase,
            paused=progress.paused,
            concurrency=progress.concurrency,
            branch=progress.branch,
        )
    return row


def _shard(status: ShardStatus, workflow: str | None) -> dict[str, Any]:
    """`workflow`: the child workflow running the shard's session now, if one does."""
    found = _SESSION_FILE.search(Path(status.session_file).name) if status.session_file else None
    return {
        "index": status.shard.index,
        "id": status.shard.id,
        "files": status.shard.files,
        "state": status.state,
        "reason": status.reason,
        "repairs": status.repairs,
        "retries": status.retries,
        "turns": status.turns,
        "cost": status.usage.cost.total,
        "commit": status.commit,
        "session": found.group(1) if found else None,
        "workflow": workflow,
    }


def _running_children(described: WorkflowExecutionDescription, shards: list[ShardStatus]) -> dict[str, str]:
    """Shard id -> the id of the child workflow that runs its session now."""
    prefix = f"{described.id}-shard-"
    found: dict[str, str] = {}
    for child in described.raw_description.pending_children:
        if not child.workflow_id.startswith(prefix):
            continue
        rest = child.workflow_id[len(prefix) :]
        for status in shards:
            if rest.startswith(status.shard.id) and _CHILD_SUFFIX.match(rest[len(status.shard.id) :]):
                found[status.shard.id] = child.workflow_id
    return found


def _report_files(progress: PipelineProgress | None, since: datetime) -> PipelineOutputs | None:
    """Where this pipeline's reports were written, if they were since `since` (the latest
    run's start): a file from an earlier run of the same spec is not this run's report."""
    if progress is None:
        return None
    outputs = remembered(progress.pipeline_id)
    if outputs is None:
        return None
    fresh: dict[str, str | None] = {}
    for field in ("markdown", "junit", "json_path"):
        path = getattr(outputs, field)
        try:
            is_fresh = path is not None and Path(path).stat().st_mtime >= since.timestamp()
        except OSError:
            is_fresh = False
        fresh[field] = path if is_fresh else None
    return outputs.model_copy(update=fresh)


class Pipelines:
    def __init__(self, client: Client) -> None:
        self.client = client

    def _workflow_id(self, request: web.Request) -> str:
        workflow_id = request.match_info["workflow_id"]
        if not _WORKFLOW_ID.match(workflow_id):
            raise web.HTTPNotFound(text="no such pipeline")
        return workflow_id

    async def list(self, request: web.Request) -> web.StreamResponse:
        """The newest run of each pipeline (one that continued as new has several), newest first."""
        latest: dict[str, WorkflowExecution] = {}
        first_start: dict[str, datetime] = {}
        try:
            async for w in self.client.list_workflows(f"WorkflowType = '{PIPELINE_WORKFLOW}'"):
                if w.id not in latest or w.start_time > latest[w.id].start_time:
                    latest[w.id] = w
                first_start[w.id] = min(first_start.get(w.id, w.start_time), w.start_time)
            rows = [
                _summary(w, await _progress(self.client, w), first_start[w.id])
                for w in sorted(latest.values(), key=lambda w: first_start[w.id], reverse=True)
            ]
        except RPCError as err:
            return web.json_response({"pipelines": [], "error": f"cannot list pipelines: {err.message}"})
        return web.json_response({"pipelines": rows})

    async def show(self, request: web.Request) -> web.StreamResponse:
        described, progress = await self._described(self._workflow_id(request))
        row = _summary(described, progress, described.start_time)
        children = _running_children(described, progress.shards) if progress else {}
        row["shardRows"] = [_shard(s, children.get(s.shard.id)) for s in progress.shards] if progress else []
        row["finalVerify"] = progress.final_verify if progress else None
        row["stoppedBy"] = progress.stopped_by if progress else None
        return web.json_response(row)

    async def _reports(self, workflow_id: str) -> PipelineOutputs | None:
        described, progress = await self._described(workflow_id)
        return _report_files(progress, described.start_time)

    async def _described(
        self, workflow_id: str
    ) -> tuple[WorkflowExecutionDescription, PipelineProgress | None]:
        """The pipeline's workflow and its progress (None when it answers none); 404 for an
        unknown one."""
        try:
            described = await self.client.get_workflow_handle(workflow_id).describe()
            return described, await _progress(self.client, described)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise web.HTTPNotFound(text=f"no pipeline {workflow_id} on this server") from err
            raise

    async def reports(self, request: web.Request) -> web.StreamResponse:
        """The reports `tempi pipeline run` or `wait` wrote when the pipeline finished: the
        Markdown summary rendered by the export's Markdown renderer, the others as downloads."""
        found = await self._reports(self._workflow_id(request))
        markdown = None
        if found is not None and found.markdown is not None:
            text = await asyncio.to_thread(Path(found.markdown).read_text, encoding="utf-8", errors="replace")
            markdown = render_markdown(text)
        return web.json_response(
            {
                "markdownHtml": markdown,
                "downloads": [
                    kind for kind, (field, _) in _DOWNLOADS.items() if found and getattr(found, field)
                ],
            }
        )

    async def download(self, request: web.Request) -> web.StreamResponse:
        workflow_id = self._workflow_id(request)
        kind = request.match_info["kind"]
        if kind not in _DOWNLOADS:
            raise web.HTTPNotFound(text="no such report")
        field, mime = _DOWNLOADS[kind]
        found = await self._reports(workflow_id)
        path = getattr(found, field) if found else None
        if path is None:
            raise web.HTTPNotFound(text=f"no {kind} report: the spec's report.{kind} names where one goes")
        body = await asyncio.to_thread(Path(path).read_bytes)
        return web.Response(
            body=body,
            content_type=mime,
            headers={"Content-Disposition": f'attachment; filename="{Path(path).name}"'},
        )

    async def act(self, request: web.Request) -> web.StreamResponse:
        """One operator control: {"action": "pause" | "resume" | "retry" | "skip" |
        "concurrency" | "cancel", "shard": id, number or file, "value": n}."""
        workflow_id = self._workflow_id(request)
        try:
            body = await request.json()
        except ValueError:
            body = None
        action = body.get("action") if isinstance(body, dict) else None
        if action not in ACTIONS:
            return _error(400, f'send JSON: {{"action": one of {", ".join(ACTIONS)}}}')
        assert isinstance(body, dict)
        arg: str | None = None
        if action in _WITH_SHARD:
            shard = body.get("shard")
            if not isinstance(shard, str) or not shard:
                return _error(400, f'{action} names a shard: {{"shard": its id, number or file}}')
            arg = shard
        elif action == "concurrency":
            value = body.get("value")
            if not isinstance(value, int) or isinstance(value, bool):
                return _error(400, 'concurrency takes a whole number: {"value": n}')
            arg = str(value)
        try:
            if action == "cancel":
                said = await cancel(self.client, workflow_id)
            else:
                said = await control(self.client, workflow_id, action, arg)
        except ControlError as err:
            return _error(409, str(err))
        except WorkflowUpdateFailedError as err:
            return _error(409, f"{action}: {failure_cause(err)}")  # the pipeline's validator said why
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return _error(
                    404, f"no running pipeline {workflow_id}: it finished, or never ran on this server"
                )
            raise
        return web.json_response({"ok": True, "said": said})


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
