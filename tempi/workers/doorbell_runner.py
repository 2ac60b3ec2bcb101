"""Rings a workflow's doorbell (store/doorbell.py) after each workflow task that moved what
its watchers read. A workflow that publishes its log (workflows/watcher_view.py) rings only
when the log's end, busy flag or session leaf changed, saying all three, and, while a
watcher listens, with the new events (store/doorbell_feed.py); any other rings after every
task.

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

from tempi.store.doorbell import doorbell_path, listening, prepare, ring
from tempi.store.doorbell_feed import ring_lines
from tempi.workers.wrapped_runner import WrappedInstance, WrappedRunner
from tempi.workflows.watcher_view import ViewSlot, WatcherView, collecting

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
        self.slot = ViewSlot()
        # The view as the last ring said; None until then, so the first task after a start,
        # a replay or a continue-as-new always rings.
        self.rung: WatcherView | None = None

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        with collecting(self.slot):
            completion = self.inner.activate(act)
        if moves_state(act):
            self._ring()
        return completion

    def _ring(self) -> None:
        try:
            news = self._news()
        except Exception:
            news = (b".\n", None)  # a log that cannot be read rings as if none were published
        if news is not None:
            ring(self.bell, news[0])
            self.rung = news[1]

    def _news(self) -> tuple[bytes, WatcherView | None] | None:
        """What to ring, and the view it announces; None: nothing a watcher reads moved."""
        log = self.slot.log
        if log is None:
            return b".\n", None
        view = log.watcher_view()
        if view == self.rung:
            return None
        first, events = None, None
        if self.rung is not None and listening(self.bell):
            first, events = log.watched_events(self.rung[0])
        return ring_lines(*view, first=first, events=events), view
