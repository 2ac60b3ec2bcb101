"""`tempi pipeline status|attach|wait|cancel|list`: pipelines on the Temporal server, by
their workflow id."""

from __future__ import annotations

import sys

from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from tempi.cli.pipeline_run import failure_cause, follow, state_line
from tempi.pipeline.reports import exit_code, summary_line
from tempi.pipeline.run_types import PIPELINE_WORKFLOW, PipelineProgress

EXIT_USAGE = 2


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


async def manage(command: str, workflow_id: str | None) -> int:
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
            if command == "status":
                progress = await _progress(rt.client, workflow_id)
                for status in progress.shards:
                    print(state_line(status, len(progress.shards)))
                print(summary_line(progress) + f"; phase {progress.phase}")
                return 0
            handle = rt.client.get_workflow_handle(workflow_id, result_type=PipelineProgress)
            progress = await follow(handle)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                print(
                    f"tempi pipeline: no pipeline {workflow_id} on this server; `tempi pipeline list` shows them",
                    file=sys.stderr,
                )
                return EXIT_USAGE
            raise
        except WorkflowFailureError as err:
            print(f"tempi pipeline: {workflow_id} failed: {failure_cause(err)}", file=sys.stderr)
            return EXIT_USAGE
    print(summary_line(progress))
    return exit_code(progress)
