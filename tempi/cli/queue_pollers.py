"""Which workers poll a task queue, as the Temporal server lists them."""

from __future__ import annotations

import os
import socket
import time

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    DescribeWorkerDeploymentVersionRequest,
    ListWorkerDeploymentsRequest,
)
from temporalio.client import Client

from tempi.workflows.session_types import DEFAULT_TASK_QUEUE

# A live worker polls again at least this often (long polls last about a minute); older
# pollers the server still lists are workers that went away.
LIVE_POLLER_S = 90.0


def _is_dead_local_process(identity: str) -> bool:
    """Whether a poller identity of the SDK's default form pid@host names a process of this
    machine that no longer exists (the server lists pollers for minutes after they stop)."""
    pid, _, host = identity.partition("@")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


async def other_workers(
    client: Client,
    task_queue: str = DEFAULT_TASK_QUEUE,
    kind: TaskQueueType.ValueType = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
) -> list[str]:
    """Identities of live workers other than this process's polling `task_queue` (for
    activities, such as model calls, unless `kind` says workflows)."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=kind,
        )
    )
    now = time.time()
    return [
        poller.identity
        for poller in response.pollers
        if poller.identity != client.identity
        and now - poller.last_access_time.ToSeconds() < LIVE_POLLER_S
        and not _is_dead_local_process(poller.identity)
    ]


async def deployments_polling(client: Client, task_queue: str) -> tuple[list[str], list[str]]:
    """The Worker Deployments whose workers poll `task_queue`, which the server does not list
    among its pollers (they take only their build's work): those with a current build there,
    and those with none, whose latest build polls it, on which a new session cannot start."""
    listed = await client.workflow_service.list_worker_deployments(
        ListWorkerDeploymentsRequest(namespace=client.namespace)
    )
    routed: list[str] = []
    unrouted: list[str] = []
    for summary in listed.worker_deployments:
        current = summary.routing_config.current_deployment_version
        version = current if current.build_id else summary.latest_version_summary.deployment_version
        if not version.build_id:
            continue
        described = await client.workflow_service.describe_worker_deployment_version(
            DescribeWorkerDeploymentVersionRequest(namespace=client.namespace, deployment_version=version)
        )
        if any(q.name == task_queue for q in described.worker_deployment_version_info.task_queue_infos):
            (routed if current.build_id else unrouted).append(summary.name)
    return routed, unrouted
