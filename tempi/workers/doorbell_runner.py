"""Rings a workflow's doorbell (store/doorbell.py) after each workflow task it runs.

The ring happens in the worker, outside the workflow sandbox, once the instance has applied
an activation: a watcher that asks right after hears the new state, since a query waits for
the task in flight. Activations that only answer queries or drop the workflow from the cache
change nothing a watcher would see, nor do those replaying history (a query to a workflow no
longer cached, or closed, is answered after one): ringing for a query would make each
watcher's ask ring for the next one."""

from __future__ import annotations

from pathlib import Path

from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner

from tempi.store.doorbell import doorbell_path, prepare, ring
from tempi.workers.wrapped_runner import WrappedInstance, WrappedRunner

_SILENT_JOBS = frozenset({"query_workflow", "remove_from_cache"})


def moves_state(act: WorkflowActivation) -> bool:
    """Whether `act` may change what a query answers."""
    return not act.is_replaying and any(job.WhichOneof("variant") not in _SILENT_JOBS for job in act.jobs)


class DoorbellRunner(WrappedRunner):
    """`inner`'s instances, each ringing its workflow's doorbell in `directory`."""

    def __init__(self, inner: WorkflowRunner, directory: Path) -> None:
        super().__init__(inner)
        self.directory = directory
        prepare(directory)

    def wrap(self, instance: WorkflowInstance, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return DoorbellInstance(instance, doorbell_path(self.directory, det.info.workflow_id))


class DoorbellInstance(WrappedInstance):
    def __init__(self, inner: WorkflowInstance, bell: Path) -> None:
        super().__init__(inner)
        self.bell = bell

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        completion = self.inner.activate(act)
        if moves_state(act):
            ring(self.bell)
        return completion
