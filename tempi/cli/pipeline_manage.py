"""`tempi pipeline status|attach|wait|cancel|list|clean|pause|resume|retry|skip|concurrency`:
pipelines on the Temporal server, by their workflow id."""

from __future__ import annotations

import sys
from datetime import datetime

from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from tempi.cli.pipeline_outputs import remembered, write_outputs
from tempi.cli.pipeline_run import failure_cause, follow, lost_server_line, state_line
from tempi.config.paths import tempi_home
from tempi.pipeline import git_work
from tempi.pipeline import run_types as names
from tempi.pipeline.reports import (
    EXIT_SERVER_LOST,
    exit_code,
    final_verify_report,
    outcome_line,
    setup_report,
    summary_line,
)
from tempi.pipeline.run_types import PIPELINE_WORKFLOW, PipelineProgress, ShardStatus
from tempi.workers.temporal_client import server_gone

EXIT_USAGE = 2
CONTROLS = ("pause", "resume", "retry", "skip", "concurrency")


class ControlError(Exception):
    """A control the pipeline cannot take (an unknown shard, one in the wrong state)."""


async def progress_of(client: Client, workflow_id: str) -> PipelineProgress:
    handle = client.get_workflow_handle(workflow_id, result_type=PipelineProgress)
    result: PipelineProgress = await handle.query("get_progress", result_type=PipelineProgress)
    return result


async def _list(client: Client) -> int:
    """One line per pipeline (a pipeline that continued as new has a run per history), newest
    first, with what became of it."""
    latest: dict[str, WorkflowExecution] = {}
    first_start: dict[str, datetime] = {}
    async for w in client.list_workflows(f"WorkflowType = '{PIPELINE_WORKFLOW}'"):
        if w.id not in latest or w.start_time > latest[w.id].start_time:
            latest[w.id] = w
        first_start[w.id] = min(first_start.get(w.id, w.start_time), w.start_time)
    for w in sorted(latest.values(), key=lambda w: first_start[w.id], reverse=True):
        said = await outcome(client, w)
        print(f"{w.id}  {said}  started {first_start[w.id].isoformat(timespec='seconds')}")
    if not latest:
        print("no pipelines on this server")
    return 0


async def outcome(client: Client, w: WorkflowExecution | WorkflowExecutionDescription) -> str:
    """What became of a pipeline: running, or its result as the exit code says it."""
    status = w.status
    if status == WorkflowExecutionStatus.RUNNING:
        return "running"
    if status != WorkflowExecutionStatus.COMPLETED:
        return status.name.lower() if status else "unknown"
    handle = client.get_workflow_handle(w.id, run_id=w.run_id, result_type=PipelineProgress)
    return outcome_line(await handle.result(follow_runs=False))


async def _clean(client: Client) -> int:
    """Remove the worktrees pipelines left (a failed shard's, kept for a look at what it
    did; a stopped run's output checkout), except those of a pipeline still running."""
    running = [
        w.id
        async for w in client.list_workflows(
            f"WorkflowType = '{PIPELINE_WORKFLOW}' AND ExecutionStatus = 'Running'"
        )
    ]
    removed = 0
    for state in sorted(p for p in (tempi_home() / "pipelines").glob("*") if p.is_dir()):
        if any(w == state.name or w.startswith(state.name + "-") for w in running):
            print(f"{state.name}: running; its worktrees stay")
            continue
        for tree in [*sorted(state.glob("shards/*/work")), git_work.output_worktree(str(state))]:
            if tree.exists():
                git_work.remove_worktree(tree)
                removed += 1
    print(f"removed {removed} worktree{'' if removed == 1 else 's'}; the shards' session files stay")
    return 0


def find_shard(progress: PipelineProgress, name: str) -> ShardStatus:
    """A shard by its id, its number or one of its files, as `tempi pipeline status` shows them."""
    for status in progress.shards:
        if name in (status.shard.id, str(status.shard.index), *status.shard.files):
            return status
    raise ControlError(
        f"no shard {name!r} in {progress.pipeline_id}; name one by its id, number or file "
        "as `tempi pipeline status ID` shows them"
    )


async def control(client: Client, workflow_id: str, command: str, arg: str | None) -> str:
    handle = client.get_workflow_handle(workflow_id)
    if command in ("pause", "resume"):
        update = names.PAUSE if command == "pause" else names.RESUME
        said: str = await handle.execute_update(update, result_type=str)
        return said
    if command == "concurrency":
        assert arg is not None
        said = await handle.execute_update(names.SET_CONCURRENCY, int(arg), result_type=str)
        return said
    assert arg is not None
    shard = find_shard(await progress_of(client, workflow_id), arg)
    update = names.RETRY_SHARD if command == "retry" else names.SKIP_SHARD
    said = await handle.execute_update(update, shard.shard.id, result_type=str)
    return said


async def cancel(client: Client, workflow_id: str) -> str:
    handle = client.get_workflow_handle(workflow_id)
    described = await handle.describe()
    if described.status != WorkflowExecutionStatus.RUNNING:
        said = await outcome(client, described)
        raise ControlError(f"{workflow_id} has finished ({said}); there is nothing to cancel")
    await handle.signal("cancel")
    return "cancel asked; running shards stop, committed ones stay"


async def manage(command: str, workflow_id: str | None, arg: str | None = None) -> int:
    from tempi.cli.runtime import open_runtime

    # A query is answered by a worker: with TEMPORAL_ADDRESS, this process runs one.
    async with open_runtime(no_worker=command in ("list", "cancel", "clean"), quiet=True) as rt:
        if command == "list":
            return await _list(rt.client)
        if command == "clean":
            return await _clean(rt.client)
        assert workflow_id is not None
        try:
            if command == "cancel":
                print(f"{workflow_id}: {await cancel(rt.client, workflow_id)}")
                return 0
            if command in CONTROLS:
                print(f"{workflow_id}: {await control(rt.client, workflow_id, command, arg)}")
                return 0
            if command == "status":
                progress = await progress_of(rt.client, workflow_id)
                for status in progress.shards:
                    print(state_line(status, len(progress.shards)))
                print(summary_line(progress) + f"; phase {progress.phase}")
                return 0
            handle = rt.client.get_workflow_handle(workflow_id, result_type=PipelineProgress)
            progress = await follow(handle)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND and command in CONTROLS:
                print(
                    f"tempi pipeline: {command}: no running pipeline {workflow_id} (it finished, or never ran "
                    "on this server); `tempi pipeline list` shows them",
                    file=sys.stderr,
                )
                return EXIT_USAGE
            if err.status == RPCStatusCode.NOT_FOUND:
                print(
                    f"tempi pipeline: no pipeline {workflow_id} on this server; `tempi pipeline list` shows them",
                    file=sys.stderr,
                )
                return EXIT_USAGE
            if server_gone(err):
                print(lost_server_line(err, f"tempi pipeline {command} {workflow_id}"), file=sys.stderr)
                return EXIT_SERVER_LOST
            raise
        except ControlError as err:
            print(f"tempi pipeline: {err}", file=sys.stderr)
            return EXIT_USAGE
        except WorkflowUpdateFailedError as err:
            # The pipeline refused it (its validator said why).
            print(f"tempi pipeline: {command}: {failure_cause(err)}", file=sys.stderr)
            return EXIT_USAGE
        except WorkflowFailureError as err:
            print(f"tempi pipeline: {workflow_id} failed: {failure_cause(err)}", file=sys.stderr)
            return EXIT_USAGE
    print(summary_line(progress))
    print(setup_report(progress) + final_verify_report(progress), end="")
    outputs = remembered(progress.pipeline_id)
    if outputs is not None:  # where `run` would have written them
        write_outputs(progress, outputs)
    return exit_code(progress)
