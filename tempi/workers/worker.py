"""A tempi worker: the session workflow plus its activities on one task queue."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Interceptor, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from tempi.activities.session_activities import CredentialResolver, SessionActivities
from tempi.activities.session_store import SessionStore
from tempi.workers.credentials import Credentials
from tempi.workflows.session_types import DEFAULT_TASK_QUEUE
from tempi.workflows.session_workflow import AgentSessionWorkflow, SubagentWorkflow


def build_worker(
    client: Client,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    sessions_root: Path,
    credentials: CredentialResolver | None = None,
    activity_hook: Interceptor | None = None,
) -> Worker:
    activities = SessionActivities(SessionStore(sessions_root), credentials or Credentials())
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(
            "tempi", "pydantic", "pydantic_core"
        )
    )
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentSessionWorkflow, SubagentWorkflow],
        activities=activities.all(),
        workflow_runner=runner,
        max_concurrent_activities=200,
        interceptors=[activity_hook] if activity_hook else [],
    )
