"""`tempi pipeline status|attach|wait|cancel|list|pause|resume|retry|skip|concurrency`:
pipelines on the Temporal server, by their workflow id."""

from __future__ import annotations

import sys

from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from tempi.cli.pipeline_run import failure_cause, follow, lost_server_line, state_line
from tempi.pipeline import run_types as names
from tempi.pipeline.reports import (
    EXIT_SERVER_LOST,
    exit_code,
    final_verify_report,
    setup_report,
    summary_line,
)
from tempi.pipeline.run_types import PIPELINE_WORKFLOW, PipelineProgress, ShardStatus
from tempi.workers.temporal_client import server_gone

EXIT_USAGE = 2
CONTROLS = ("pause", "resume", "retry", "skip", "concurrency")


class ControlError(Exception):
    """A control the pipeline cannot take (an unknown shard, one in the wrong state)."""


async def _progress(client: Client, workflow_id: str) -> PipelineProgress:
    handle = client.get_workflow_handle(workflow_id, result_type=PipelineProgress)
    result: PipelineProgress = await handle.query("get_progress", result_type=PipelineProgress)
    return result


async def _list(client: Client) -> int:
    query = f"WorkflowType = '{PIPELINE_WORKFLOW}'"
    count = 0
    async for w in client.list_workflows(query):
        status = w.status.name.lower() if w.status else "unknown"
        print(f"{w.id}  {status}  started {w.start_time.isoformat(timespec='seconds')}")
        count += 1
    if not count:
        print("no pipelines on this server")
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


async def _control(client: Client, workflow_id: str, command: str, arg: str | None) -> str:
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
    shard = find_shard(await _progress(client, workflow_id), arg)
    update = names.RETRY_SHARD if command == "retry" else names.SKIP_SHARD
    said = await handle.execute_update(update, shard.shard.id, result_type=str)
    return said


async def manage(command: str, workflow_id: str | None, arg: str | None = None) -> int:
    from tempi.cli.runtime import open_runtime

    # A query is answered by a worker: with TEMPORAL_ADDRESS, this process runs one.
    async with open_runtime(no_worker=command in ("list", "cancel"), quiet=True) as rt:
        if command == "list":
            return await _list(rt.client)
        assert workflow_id is not None
        try:
            if command == "cancel":
                await rt.client.get_workflow_handle(workflow_id).signal("cancel")
                print(f"{workflow_id}: cancel asked; running shards stop, committed ones stay")
                return 0
            if command in CONTROLS:
                print(f"{workflow_id}: {await _control(rt.client, workflow_id, command, arg)}")
                return 0
            if command == "status":
                progress = await _progress(rt.client, workflow_id)
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
    return exit_code(progress)
