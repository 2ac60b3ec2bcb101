"""A container's health check for `tempi worker`: healthy while Temporal lists a poller from
this host on the worker's task queue, so a worker that lost its server, or never reached it,
shows as unhealthy in `docker ps` and holds back the services that wait for it.

    python -m tempi.workers.healthcheck [--task-queue QUEUE]      exit 0 healthy, 1 not

The connection settings are the worker's own (TEMPORAL_ADDRESS, a temporal.toml profile)."""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import time

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from tempi.workers.temporal_client import configured_address, connect
from tempi.workflows.session_types import DEFAULT_TASK_QUEUE

# A worker polls continuously and each long poll lasts about a minute; a poller not seen for
# longer than this has stopped.
POLL_SEEN_WITHIN_S = 120


async def polling_from_this_host(task_queue: str) -> str | None:
    """None when a poller of this host (worker identities are pid@hostname) polled `task_queue`
    lately, else why not."""
    address = configured_address()
    if address is None:
        return "TEMPORAL_ADDRESS is not set, so this host's worker polls no shared server"
    client = await connect(address)
    answer = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    suffix = f"@{socket.gethostname()}"
    now = time.time()
    for poller in answer.pollers:
        if poller.identity.endswith(suffix) and now - poller.last_access_time.seconds < POLL_SEEN_WITHIN_S:
            return None
    return f"no worker of {socket.gethostname()} polled {task_queue} on {address} in {POLL_SEEN_WITHIN_S} s"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tempi.workers.healthcheck")
    p.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE)
    args = p.parse_args(argv)
    try:
        problem = asyncio.run(polling_from_this_host(args.task_queue))
    except Exception as err:  # any failure to ask is an unhealthy answer, said in one line
        problem = f"{type(err).__name__}: {err}"
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    print("healthy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
