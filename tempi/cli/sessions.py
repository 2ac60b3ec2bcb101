"""Starting, resuming and finding session workflows from a client."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.agent.subagents import AgentDefinition
from tempi.store.session_store import SessionStore
from tempi.workflows.session_types import (
    DEFAULT_SANDBOX_IMAGE,
    DEFAULT_TASK_QUEUE,
    SESSION_WORKFLOW,
    CompactionPolicy,
    RetryPolicySettings,
    SessionConfig,
    SessionInput,
    SessionStateView,
    workflow_id_for,
)


class SessionNotFound(RuntimeError):
    pass


@dataclass
class SessionPlan:
    """What the CLI decided about the session before any workflow exists."""

    cwd: str
    model: ModelSpec
    thinking_level: ThinkingLevel
    system_prompt: str
    tools: list[str]
    retry: RetryPolicySettings
    sandbox: str = "local"
    sandbox_image: str = DEFAULT_SANDBOX_IMAGE
    agents: list[AgentDefinition] = field(default_factory=list)
    compaction: CompactionPolicy = field(default_factory=CompactionPolicy)
    find_model: Callable[[str, str], ModelSpec | None] | None = None
    steering_mode: str = "one-at-a-time"
    follow_up_mode: str = "one-at-a-time"


def _iso_now() -> str:
    ms = int(time.time() * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(ms / 1000)) + f"{ms % 1000:03d}Z"


async def is_running(handle: WorkflowHandle[Any, Any]) -> bool:
    try:
        desc = await handle.describe()
    except RPCError:
        return False
    return desc.status == WorkflowExecutionStatus.RUNNING


async def start_new_session(
    client: Client,
    store: SessionStore,
    plan: SessionPlan,
    *,
    session_dir: Path | None = None,
    parent_session: str | None = None,
) -> tuple[WorkflowHandle[Any, Any], SessionConfig]:
    session_id = str(uuid.uuid4())
    created = _iso_now()
    path = (
        (session_dir / f"{created.replace(':', '-').replace('.', '-')}_{session_id}.jsonl")
        if session_dir
        else store.new_session_path(plan.cwd, session_id, created)
    )
    config = SessionConfig(
        session_id=session_id,
        session_path=str(path),
        cwd=plan.cwd,
        model=plan.model,
        thinking_level=plan.thinking_level,
        system_prompt=plan.system_prompt,
        tools=plan.tools,
        sandbox=plan.sandbox,  # type: ignore[arg-type]
        sandbox_image=plan.sandbox_image,
        agents=plan.agents,
        retry=plan.retry,
        compaction=plan.compaction,
        steering_mode=plan.steering_mode,  # type: ignore[arg-type]
        follow_up_mode=plan.follow_up_mode,  # type: ignore[arg-type]
        created_at=created,
        parent_session=parent_session,
    )
    await client.start_workflow(
        SESSION_WORKFLOW,
        SessionInput(config=config),
        id=workflow_id_for(session_id),
        task_queue=DEFAULT_TASK_QUEUE,
    )
    # Not pinned to this run: the session continues as new, and clients follow it.
    return client.get_workflow_handle(workflow_id_for(session_id)), config


async def resume_session(
    client: Client, store: SessionStore, path: Path, plan: SessionPlan, *, override_model: bool
) -> tuple[WorkflowHandle[Any, Any], SessionConfig]:
    """Attach to the session's running workflow, or start one that continues the file."""
    loaded = store.load(path)
    session_id = loaded.header.id
    handle = client.get_workflow_handle(workflow_id_for(session_id))
    context = loaded.tree.build_context(loaded.tree.leaf_id)
    model = plan.model
    thinking = plan.thinking_level
    if not override_model and context.model_id and context.provider:
        # Continue with the session's own model when this machine knows it.
        restored = plan.find_model(context.provider, context.model_id) if plan.find_model else None
        if restored is not None:
            model = restored
        if context.thinking_level:
            thinking = context.thinking_level
    config = SessionConfig(
        session_id=session_id,
        session_path=str(path),
        cwd=loaded.header.cwd or plan.cwd,
        model=model,
        thinking_level=thinking,
        system_prompt=plan.system_prompt,
        tools=plan.tools,
        sandbox=plan.sandbox,  # type: ignore[arg-type]
        sandbox_image=plan.sandbox_image,
        agents=plan.agents,
        retry=plan.retry,
        compaction=plan.compaction,
        resume_leaf_id=loaded.tree.leaf_id,
        existing_file=True,
    )
    if await is_running(handle):
        return handle, config
    await client.start_workflow(
        SESSION_WORKFLOW,
        SessionInput(config=config),
        id=workflow_id_for(session_id),
        task_queue=DEFAULT_TASK_QUEUE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    return client.get_workflow_handle(workflow_id_for(session_id)), config


async def find_handle(client: Client, store: SessionStore, session_ref: str) -> WorkflowHandle[Any, Any]:
    """A running session by id, id prefix or file path."""
    handle = client.get_workflow_handle(workflow_id_for(session_ref))
    if await is_running(handle):
        return handle
    try:
        path = store.find_session(session_ref)
    except Exception as err:
        raise SessionNotFound(f"No session matches {session_ref!r}: {err}") from err
    loaded = store.load(path)
    handle = client.get_workflow_handle(workflow_id_for(loaded.header.id))
    if not await is_running(handle):
        raise SessionNotFound(
            f"Session {loaded.header.id} is not running. Continue it with `tempi --session {loaded.header.id}`."
        )
    return handle


async def session_state(handle: WorkflowHandle[Any, Any]) -> SessionStateView:
    return await handle.query("get_state", result_type=SessionStateView)
