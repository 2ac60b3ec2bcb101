"""Rings a workflow's doorbell (store/doorbell.py) after each workflow task it runs.

The ring happens in the worker, outside the workflow sandbox, once the instance has applied
an activation: a watcher that asks right after hears the new state, since a query waits for
the task in flight. Activations that only answer queries or drop the workflow from the cache
change nothing a watcher would see, nor do those replaying history (a query to a workflow no
longer cached, or closed, is answered after one): ringing for a query would make each
watcher's ask ring for the next one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import SerializationContext, StorageDriverStoreContext
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.workflow import Info

from tempi.store.doorbell import doorbell_path, prepare, ring

if TYPE_CHECKING:
    from temporalio.worker._command_aware_visitor import CommandInfo
    from temporalio.workflow import _Definition

_SILENT_JOBS = frozenset({"query_workflow", "remove_from_cache"})


def moves_state(act: WorkflowActivation) -> bool:
    """Whether `act` may change what a query answers."""
    return not act.is_replaying and any(job.WhichOneof("variant") not in _SILENT_JOBS for job in act.jobs)


class DoorbellRunner(WorkflowRunner):
    """`inner`'s instances, each ringing its workflow's doorbell in `directory`."""

    def __init__(self, inner: WorkflowRunner, directory: Path) -> None:
        self.inner = inner
        self.directory = directory
        prepare(directory)

    def prepare_workflow(self, defn: _Definition) -> None:
        self.inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        bell = doorbell_path(self.directory, det.info.workflow_id)
        return DoorbellInstance(self.inner.create_instance(det), bell)

    def set_worker_level_failure_exception_types(self, types: Sequence[type[BaseException]]) -> None:
        self.inner.set_worker_level_failure_exception_types(types)


class DoorbellInstance(WorkflowInstance):
    def __init__(self, inner: WorkflowInstance, bell: Path) -> None:
        self.inner = inner
        self.bell = bell

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        completion = self.inner.activate(act)
        if moves_state(act):
            ring(self.bell)
        return completion

    def get_serialization_context(self, command_info: CommandInfo | None) -> SerializationContext | None:
        return self.inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: CommandInfo | None) -> StorageDriverStoreContext:
        return self.inner.get_external_store_context(command_info)

    def get_info(self) -> Info:
        return self.inner.get_info()

    def get_thread_id(self) -> int | None:
        return self.inner.get_thread_id()
