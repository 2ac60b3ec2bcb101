"""The workflow sandbox tempi runs its workflows in, minus one trip into it that tempi's
converter never needs.

For every payload of every activation and completion, the SDK asks the workflow instance for
that payload's serialization context (and, on the way out, for an external-storage context).
The sandboxed instance answers each question by running code inside the sandbox, which swaps
the sandbox's module table in and out: 9.6% of a busy worker's main thread in a profile at
100 sessions. A converter, codec and failure converter that read no context, with no
external storage, throw every answer away, so for them the instance answers at once. That
is checked on the converter the worker really uses; any other converter gets the plain
sandbox runner."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.converter import (
    DataConverter,
    SerializationContext,
    StorageDriverStoreContext,
    WorkflowSerializationContext,
)
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from tempi.workers.doorbell_runner import DoorbellRunner
from tempi.workers.wrapped_runner import WrappedInstance, WrappedRunner

if TYPE_CHECKING:
    # The SDK's own names for what its runner interface passes; private, so types only.
    from temporalio.worker._command_aware_visitor import CommandInfo

# Pure code the workflows import: shared with the sandbox instead of re-imported per run.
PASSTHROUGH_MODULES = ("tempi", "pydantic", "pydantic_core")

_PROBE = WorkflowSerializationContext(namespace="probe", workflow_id="probe")
# What the instance answers for external storage; without any, the SDK never reads it.
_NO_STORE_CONTEXT = StorageDriverStoreContext()


def sandbox_runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)
    )


def ignores_context(converter: DataConverter) -> bool:
    """Whether serializing with `converter` comes out the same under any context: no part of
    it takes one (`with_context` hands back the converter itself) and nothing is stored
    outside the history."""
    return converter.external_storage is None and converter.with_context(_PROBE) is converter


def workflow_runner(converter: DataConverter, doorbells: Path | None = None) -> WorkflowRunner:
    """The runner for workers and replayers that serialize with `converter`; with `doorbells`,
    a worker's that rings each workflow's doorbell there after its tasks (doorbell_runner.py)."""
    runner: WorkflowRunner = (
        ContextFreeSandboxRunner(sandbox_runner()) if ignores_context(converter) else sandbox_runner()
    )
    return DoorbellRunner(runner, doorbells) if doorbells is not None else runner


class ContextFreeSandboxRunner(WrappedRunner):
    """Runs every workflow in `sandbox`, answering the per-payload context questions outside
    it. Only for converters `ignores_context` accepts."""

    def __init__(self, sandbox: SandboxedWorkflowRunner) -> None:
        super().__init__(sandbox)

    def wrap(self, instance: WorkflowInstance, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return ContextFreeInstance(instance)


class ContextFreeInstance(WrappedInstance):
    def get_serialization_context(self, command_info: CommandInfo | None) -> SerializationContext | None:
        # None selects the worker's own converter, which is what any context would give back.
        return None

    def get_external_store_context(self, command_info: CommandInfo | None) -> StorageDriverStoreContext:
        return _NO_STORE_CONTEXT
