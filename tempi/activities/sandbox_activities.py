"""Activities around a session's docker sandbox: create it (on any worker that reaches a
Docker engine), and at the end of a subagent collect its patch and remove it (on the
worker of the container's host)."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from tempi.activities.sandbox import SandboxError, load_sandbox_settings, workspace_patch
from tempi.activities.sandbox_policy import check_sandbox
from tempi.store.sidecar import sidecar_dir
from tempi.workflows import activity_names as names
from tempi.workflows.activity_payloads import (
    SandboxCreated,
    SandboxCreateInput,
    SandboxFinished,
    SandboxFinishInput,
)

SANDBOX_USER = "1000:1000"


def workspace_user(folder: str) -> str:
    """Run as the folder's owner so files keep their owner; root-owned folders get the
    unprivileged sandbox user (the container never runs tools as root)."""
    info = os.stat(folder)
    return f"{info.st_uid}:{info.st_gid}" if info.st_uid != 0 else SANDBOX_USER


def copy_workspace(source: str, target: Path) -> str:
    """A private copy of the parent's workspace for a subagent, owned by the sandbox user."""
    if not target.exists():
        shutil.copytree(source, target, symlinks=True)
        uid, gid = (int(x) for x in SANDBOX_USER.split(":"))
        if os.getuid() == 0:
            for root, dirs, files in os.walk(target):
                for name in [*dirs, *files]:
                    os.lchown(os.path.join(root, name), uid, gid)
            os.chown(target, uid, gid)
    return str(target)


class SandboxActivities:
    """The Docker SDK is loaded by the first call: the main queue's worker registers `create`
    wherever an engine is configured, before it knows whether one answers."""

    @activity.defn(name=names.CREATE_SANDBOX)
    async def create(self, inp: SandboxCreateInput) -> SandboxCreated:
        from tempi.activities.sandbox import SandboxSpec, create_sandbox
        from tempi.activities.sandbox.user_container import attach_user_container

        check_sandbox("container" if inp.container else "docker")
        if inp.container:
            try:
                found = await attach_user_container(inp.container, inp.workspace)
            except SandboxError as err:
                # Retrying cannot start the user's container; they must.
                raise ApplicationError(str(err), type="SandboxUnavailable", non_retryable=True) from None
            return SandboxCreated(
                container_id=found.container_id, task_queue=found.task_queue, workspace=found.workdir
            )
        workspace = inp.workspace
        if inp.copy_from:
            target = sidecar_dir(inp.session_path, inp.session_id) / "workspace"
            workspace = await asyncio.to_thread(copy_workspace, inp.copy_from, target)
        # The owner's limits, read where the sandbox is made; the session cannot choose them.
        limits = load_sandbox_settings()
        spec = SandboxSpec(
            image=inp.image,
            workspace=workspace,
            network=inp.network,
            user=workspace_user(workspace),
            **limits.model_dump(exclude_none=True),
        )
        info = await create_sandbox(spec, inp.session_id)
        return SandboxCreated(container_id=info.container_id, task_queue=info.task_queue, workspace=workspace)

    @activity.defn(name=names.FINISH_SANDBOX)
    async def finish(self, inp: SandboxFinishInput) -> SandboxFinished:
        from tempi.activities.sandbox import destroy_sandbox, open_backend

        patch = None
        if inp.want_patch:
            try:
                patch = await workspace_patch(await open_backend(inp.container_id)) or None
            except SandboxError:
                patch = None  # the container is already gone: nothing to report
        await destroy_sandbox(inp.session_id)
        return SandboxFinished(patch=patch)
