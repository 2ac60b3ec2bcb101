"""tempi's workers: the session workflows and their activities on the main task queue,
plus, where a Docker engine answers, the tool activities of the sandboxes on that engine
(`sandbox-<host>`), which must run where their containers are."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import os
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import Interceptor, Worker, WorkerDeploymentConfig

from tempi.activities.extension_activities import ExtensionActivities
from tempi.activities.mcp.activities import McpActivities
from tempi.activities.model_options import CredentialResolver
from tempi.activities.pipeline import PIPELINE_ACTIVITIES
from tempi.activities.session_activities import SessionActivities
from tempi.activities.tool_handoff import ToolHandoff, own_queue
from tempi.store.doorbell import worker_doorbells
from tempi.store.session_store import SessionStore
from tempi.workers.model_guard import owner_credentials
from tempi.workers.workflow_runner import workflow_runner
from tempi.workflows.pipeline_shard_workflow import PipelineShardWorkflow
from tempi.workflows.pipeline_workflow import PipelineWorkflow
from tempi.workflows.session_types import DEFAULT_TASK_QUEUE, sandbox_creation_queue
from tempi.workflows.session_workflow import AgentSessionWorkflow
from tempi.workflows.slack_conversation_workflow import SlackConversationWorkflow
from tempi.workflows.slack_event_workflow import SlackEventWorkflow
from tempi.workflows.subagent_workflow import SubagentWorkflow

WORKFLOWS = [
    AgentSessionWorkflow,
    SubagentWorkflow,
    SlackConversationWorkflow,
    SlackEventWorkflow,
    PipelineWorkflow,
    PipelineShardWorkflow,
]
# The SDK sends heartbeats at most every 0.8 × the heartbeat timeout (8 s for tools), and a
# cancellation arrives only in a heartbeat's answer: an abort let a `sleep 3` finish. A short
# throttle delivers it within a beat.
HEARTBEAT_THROTTLE = timedelta(milliseconds=100)
# A live worker takes its sticky workflow tasks within milliseconds; a gateway that died leaves
# its conversations' next tasks on its sticky queue for this long before another worker gets
# them (the SDK's 10 s default was most of the wait after a gateway's restart).
SLACK_STICKY_TIMEOUT = timedelta(seconds=1)
# The same for sessions: a worker stopped in a rolling update (or killed) can leave a session's
# next workflow task on its sticky queue, and the session's next prompt then waited out the
# SDK's 10 s default. A live worker, even a busy one, has a poll waiting on its sticky queue
# while it has a free workflow task slot.
SESSION_STICKY_TIMEOUT = timedelta(seconds=2)


GRACE_ENV = "TEMPI_WORKER_GRACE_SECONDS"
# Under Kubernetes' default 30 s terminationGracePeriod with room for the SDK to wind down;
# the shipped manifests and compose file give the container longer than this.
DEFAULT_GRACE = timedelta(seconds=25)


def shutdown_grace() -> timedelta:
    """How long a stopping `tempi worker` lets running model calls and commands finish."""
    raw = os.environ.get(GRACE_ENV, "").strip()
    if not raw:
        return DEFAULT_GRACE
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1
    if not 0 <= seconds <= 24 * 3600:
        raise ValueError(
            f"{GRACE_ENV}={raw!r}: give the seconds a stopping worker waits for running tasks, e.g. 25"
        )
    return timedelta(seconds=seconds)


# Worker versioning is opt-in: with a deployment name, the main-queue worker joins that Worker
# Deployment as the version named by its build id, and sessions stay on the build they run on.
DEPLOYMENT_NAME_ENV = "TEMPI_DEPLOYMENT_NAME"
BUILD_ID_ENV = "TEMPI_BUILD_ID"


def build_id() -> str:
    """The worker's build id, named rather than left to the SDK: its default hashes the code of
    every loaded module (4,000+), which took 0.7 s of each worker start, and 8 s where Python
    keeps no bytecode cache. A deployment sets its own (an image tag, a commit) in
    TEMPI_BUILD_ID; without versioning it only labels the worker in history and the UI."""
    return os.environ.get(BUILD_ID_ENV, "").strip() or f"tempi-{importlib.metadata.version('tempi')}"


def deployment_name() -> str | None:
    """The Worker Deployment `tempi worker` joins, from TEMPI_DEPLOYMENT_NAME. Only that
    command reads it: the embedded service's worker is alone and stays unversioned."""
    return os.environ.get(DEPLOYMENT_NAME_ENV, "").strip() or None


def versioning(deployment: str | None) -> dict[str, Any]:
    """The Worker options that name this worker's build: a member of the Worker Deployment
    `deployment` when given, else a plain build id (the single-process default).

    Versioned workflows are pinned: a run finishes on the code it started on, so a change to
    workflow code never meets a history it did not write. Sessions move to the deployment's
    current build when they continue as new (AgentSessionWorkflow._continue_as_new)."""
    if deployment is None:
        return {"build_id": build_id()}
    return {
        "deployment_config": WorkerDeploymentConfig(
            version=WorkerDeploymentVersion(deployment_name=deployment, build_id=build_id()),
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        )
    }


def build_worker(
    client: Client,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    sessions_root: Path,
    credentials: CredentialResolver | None = None,
    activity_hook: Interceptor | None = None,
    deployment: str | None = None,
    grace: timedelta = timedelta(0),
    creates_sandboxes: bool = False,
    handoff: ToolHandoff | None = None,
) -> Worker:
    """The main queue's worker. `creates_sandboxes` (a Docker engine is configured here) also takes
    the sandbox creations of sessions that began before they had a queue of their own.
    Without `handoff` (and its worker, `build_handoff_worker`), a bash, grep or find call runs
    to its end inside the workflow task."""
    from tempi.activities.sandbox_activities import SandboxActivities

    if handoff is None:
        handoff = ToolHandoff(session_activities(sessions_root, credentials), None)
    activities = handoff.tools
    return Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        # One set of MCP connections per worker: servers start once and serve every session.
        activities=[
            *activities.all(),
            handoff.run_tool_briefly,
            *McpActivities().all(),
            *ExtensionActivities(activities.store).all(),
            *([SandboxActivities().create] if creates_sandboxes else []),
            *PIPELINE_ACTIVITIES,
        ],
        workflow_runner=workflow_runner(client.data_converter, worker_doorbells()),
        max_concurrent_activities=200,
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        sticky_queue_schedule_to_start_timeout=SESSION_STICKY_TIMEOUT,
        interceptors=[activity_hook] if activity_hook else [],
        graceful_shutdown_timeout=grace,
        **versioning(deployment),
    )


def session_activities(sessions_root: Path, credentials: CredentialResolver | None) -> SessionActivities:
    return SessionActivities(SessionStore(sessions_root), credentials or owner_credentials())


def build_handoff_worker(
    client: Client, handoff: ToolHandoff, activity_hook: Interceptor | None, grace: timedelta
) -> Worker:
    """Awaits the tool calls this process started inside workflow tasks, on its own queue.
    Unversioned, as the sandbox host's worker is: it runs no workflow code."""
    assert handoff.queue is not None
    return _tools_worker(client, handoff.queue, [handoff.await_tool, handoff.stop_tool], activity_hook, grace)


def _tools_worker(
    client: Client,
    queue: str,
    activities: Sequence[Callable[..., Any]],
    activity_hook: Interceptor | None,
    grace: timedelta,
) -> Worker:
    """An unversioned worker of tool activities: heartbeats as often as an abort needs."""
    return Worker(
        client,
        task_queue=queue,
        activities=activities,
        max_concurrent_activities=200,
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        interceptors=[activity_hook] if activity_hook else [],
        graceful_shutdown_timeout=grace,
        build_id=build_id(),
    )


def build_slack_worker(client: Client, task_queue: str, activities: Sequence[Callable[..., Any]]) -> Worker:
    """The Slack conversations' worker; it runs in `tempi slack`, whose environment holds the
    Slack tokens its activities need (the background service's does not)."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[SlackConversationWorkflow, SlackEventWorkflow],
        activities=activities,
        workflow_runner=workflow_runner(client.data_converter, worker_doorbells()),
        max_concurrent_activities=100,
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        sticky_queue_schedule_to_start_timeout=SLACK_STICKY_TIMEOUT,
        build_id=build_id(),
    )


def docker_endpoint_configured() -> bool:
    """Whether a Docker engine may answer here (DOCKER_HOST names one, or the default socket
    exists), checked without loading the Docker SDK."""
    return bool(os.environ.get("DOCKER_HOST")) or os.path.exists("/var/run/docker.sock")


def docker_host_queue() -> str | None:
    """This machine's sandbox queue when a Docker engine answers, else None."""
    try:
        import docker

        from tempi.activities.sandbox import sandbox_task_queue

        client = docker.from_env(timeout=3)
        client.ping()
        return sandbox_task_queue(client)
    except Exception:
        return None


def build_sandbox_creator(
    client: Client, queue: str, activity_hook: Interceptor | None, grace: timedelta
) -> Worker:
    """Creates the docker sandboxes of the main queue's sessions, on this host's engine; a
    worker without one never polls this queue, so never fails the work for want of it.
    Unversioned, as the sandbox host's worker is."""
    from tempi.activities.sandbox_activities import SandboxActivities

    return Worker(
        client,
        task_queue=queue,
        activities=[SandboxActivities().create],
        max_concurrent_activities=20,
        interceptors=[activity_hook] if activity_hook else [],
        graceful_shutdown_timeout=grace,
        build_id=build_id(),
    )


def build_sandbox_worker(
    client: Client,
    queue: str,
    *,
    sessions_root: Path,
    credentials: CredentialResolver | None = None,
    activity_hook: Interceptor | None = None,
    grace: timedelta = timedelta(0),
) -> Worker:
    from tempi.activities.sandbox_activities import SandboxActivities

    activities = session_activities(sessions_root, credentials)
    # Unversioned even in a versioned deployment: it runs no workflow code, and a session pinned
    # to an older build must still reach the tools of whatever build serves this host.
    return _tools_worker(
        client,
        queue,
        [
            activities.run_tool,
            activities.run_user_bash,
            ExtensionActivities(activities.store).call_extension_tool,
            SandboxActivities().finish,
        ],
        activity_hook,
        grace,
    )


@contextlib.asynccontextmanager
async def running_workers(
    client: Client,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    sessions_root: Path,
    credentials: CredentialResolver | None = None,
    activity_hook: Interceptor | None = None,
    host_sandboxes: bool = True,
    deployment: str | None = None,
    grace: timedelta = timedelta(0),
    sandboxes_after: asyncio.Future[Any] | None = None,
) -> AsyncIterator[list[Worker]]:
    """The workers of this process, shut down on leaving: they stop taking work, and what
    runs has `grace` to finish before it is cancelled (and retried elsewhere, as its
    retry policy allows). Where a Docker engine answers, also the sandbox creations of the
    main queue's sessions and the tools of this host's sandboxes, started once
    `sandboxes_after` is done (the Docker probe's CPU would slow what it waits for)."""
    # The main queue polls before the Docker engine is probed: the probe loads the Docker
    # SDK, and a cold start's first prompt waits for the main queue, not for sandboxes. The
    # sandbox creations of sessions older than their own creation queue still need this
    # worker to register them up front, wherever an engine is configured.
    engine_configured = host_sandboxes and docker_endpoint_configured()
    handoff = ToolHandoff(session_activities(sessions_root, credentials), own_queue(task_queue))
    main = build_worker(
        client,
        task_queue=task_queue,
        sessions_root=sessions_root,
        activity_hook=activity_hook,
        deployment=deployment,
        grace=grace,
        creates_sandboxes=engine_configured,
        handoff=handoff,
    )
    handoff_worker = build_handoff_worker(client, handoff, activity_hook, grace)
    async with contextlib.AsyncExitStack() as stack:
        # Left last: a call handed to this process's own queue as the main queue's worker
        # drained is still awaited there.
        await stack.enter_async_context(handoff_worker)
        await stack.enter_async_context(main)
        workers = [main]
        if engine_configured and sandboxes_after is not None:
            await asyncio.wait([sandboxes_after])  # its outcome is its owner's business
        queue = await asyncio.to_thread(docker_host_queue) if engine_configured else None
        if queue:
            from tempi.workers.orphans import sweep_orphan_sandboxes

            await sweep_orphan_sandboxes(client)
            for worker in (
                build_sandbox_creator(client, sandbox_creation_queue(task_queue), activity_hook, grace),
                build_sandbox_worker(
                    client,
                    queue,
                    sessions_root=sessions_root,
                    credentials=credentials,
                    activity_hook=activity_hook,
                    grace=grace,
                ),
            ):
                await stack.enter_async_context(worker)
                workers.append(worker)
        yield [*workers, handoff_worker]
