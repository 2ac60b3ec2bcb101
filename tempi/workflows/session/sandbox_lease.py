"""The session's docker sandbox: created with the first tool call that needs it, forgotten
when its host is gone (the next call starts a fresh one), finished when the session ends.
With `--sandbox container:NAME` the user's own container is looked up instead, and left
as it is when the session ends."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from tempi.workflows import activity_names as act
    from tempi.workflows.activity_payloads import (
        SandboxCreated,
        SandboxCreateInput,
        SandboxFinished,
        SandboxFinishInput,
        SessionFileRef,
    )
    from tempi.workflows.session.activity_errors import cause, never_started
    from tempi.workflows.session.activity_options import Activities
    from tempi.workflows.session_types import CarriedState, SandboxRef, SessionConfig, sandbox_creation_queue

# Sandboxes were created on the main queue, where workers without a Docker engine picked the
# work up and failed it (a tool error, or retries until an engine's worker got it). Now they
# are asked for on a queue only workers with an engine poll.
SANDBOX_CREATION_QUEUE = "sandbox-creation-queue"


class SandboxLease:
    def __init__(
        self, config: SessionConfig, state: CarriedState, file_ref: SessionFileRef, activities: Activities
    ) -> None:
        self.config = config
        self.state = state
        self.file_ref = file_ref
        self.activities = activities
        self.creation_queue: str | None = None
        if state.sandbox is not None:
            file_ref.container_id = state.sandbox.container_id

    def user_container(self) -> str | None:
        """The name of the user's own container (`--sandbox container:NAME`), if tools run there."""
        return self.config.sandbox_container if self.config.sandbox == "container" else None

    async def queue(self) -> str | None:
        """The task queue of the host running this session's container, creating it first;
        None when tools run on the main queue."""
        if self.config.sandbox not in ("docker", "container"):
            return None
        if self.state.sandbox is None:
            self.creation_queue = (
                sandbox_creation_queue(workflow.info().task_queue)
                if workflow.patched(SANDBOX_CREATION_QUEUE)
                else None
            )
            created: SandboxCreated = await self.activities.execute(
                act.CREATE_SANDBOX,
                SandboxCreateInput(
                    session_id=self.config.session_id,
                    session_path=self.config.session_path,
                    image=self.config.sandbox_image,
                    workspace=self.config.cwd,
                    copy_from=self.config.workspace_copy_from,
                    network=self.config.sandbox_network,
                    # The user's own container is only looked up, on the main queue's
                    # worker's engine; its tools then go to that host's queue.
                    container=self.user_container(),
                ),
                SandboxCreated,
                task_queue=self.creation_queue,
            )
            self.state.sandbox = SandboxRef(container_id=created.container_id, task_queue=created.task_queue)
        self.file_ref.container_id = self.state.sandbox.container_id
        return self.state.sandbox.task_queue

    def unavailable(self, err: BaseException) -> str:
        """Why the sandbox could not be had, from the creating activity's failure."""
        if never_started(err) and self.creation_queue is not None:
            return (
                f"no worker that can create sandboxes took the request within "
                f"{self.config.sandbox_pickup_s:g} s: a `tempi worker` that reaches a Docker engine "
                f'polls {self.creation_queue} (docs/operations.md, "Topologies")'
            )
        return cause(err)

    def forget(self) -> None:
        self.state.sandbox = None
        self.file_ref.container_id = None

    async def finish(self, want_patch: bool) -> str | None:
        """Remove the session's container (a subagent's patch is collected first)."""
        sandbox = self.state.sandbox
        if self.config.sandbox == "container":
            self.forget()  # the user's container outlives every session
            return None
        if sandbox is None:
            return None
        try:
            finished: SandboxFinished = await self.activities.execute(
                act.FINISH_SANDBOX,
                SandboxFinishInput(
                    session_id=self.config.session_id,
                    container_id=sandbox.container_id,
                    want_patch=want_patch,
                ),
                SandboxFinished,
                task_queue=sandbox.task_queue,
            )
        except ActivityError:
            return None
        finally:
            self.forget()
        return finished.patch
