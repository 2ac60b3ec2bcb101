"""A session's Temporal history as its doorbell, for watchers no doorbell file reaches.

A watcher whose home is not the worker's (a laptop attached to a team's cluster, the web
console in a container of its own) finds no doorbell file (store/doorbell.py), and asked the
workflow on a timer instead: a query its worker answers, every poll while a run goes on and
about once a second while it is idle, most of them bringing nothing. What a query answers
changes only when a workflow task completes, and each completion is an event in the
workflow's history, which the server long-polls (`wait_new_event`) without the worker. So a
process keeps one such poll open per watched workflow, and its state moves with each
completed task and with the run's end; followers ask when it moved, as they do when a
doorbell rings, and otherwise only every HISTORY_QUIET_ASK_S.

A state is `(0, run, event id)`: the run (a hash of its original id) and the event id of its
newest completed workflow task or close. It reads the same in every process that follows the
workflow, so shared followers keep it in their lock file as they keep a doorbell's `(inode,
size)`; the two never compare equal. While the poll is failing (the server restarting, a
workflow not started yet) the state is None and followers fall back to their timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
import zlib
from collections.abc import Callable

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.enums.v1.workflow_pb2 import WORKFLOW_EXECUTION_STATUS_RUNNING
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionRequest,
    GetWorkflowExecutionHistoryRequest,
)
from temporalio.client import Client

from tempi.store.doorbell import QUIET_ASK_S, BellState
from tempi.store.file_watch import NewsWaker

# With the history followed, nothing a query answers changes unseen: a follower asks now and
# then only against what cannot be foreseen (a poll silently stuck in a proxy).
HISTORY_QUIET_ASK_S = 15.0
# Between one answer of the poll and the next poll: a turn writes its history in several
# bursts a few ms apart, each of which would end a poll and cost the server a history read;
# waiting as long as a follower's poll interval lets one read take in the whole burst.
POLL_GAP_S = 0.05
# After a failed poll: the followers ask on their timer meanwhile.
RETRY_S = 1.0
# Between looks at a closed workflow for a run that reopens it (a describe, no worker).
CLOSED_LOOK_S = 2.0

_MOVES = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
}


def from_history(bell: BellState) -> bool:
    return bell is not None and len(bell) == 3


def quiet_ask_s(bell: BellState) -> float:
    """How long a follower whose bell stays as it is goes without asking."""
    return HISTORY_QUIET_ASK_S if from_history(bell) else QUIET_ASK_S


class HistoryBell:
    """The long poll of one workflow's history, shared by the followers of one process."""

    def __init__(
        self, client: Client, workflow_id: str, on_unused: Callable[[], object] = lambda: None
    ) -> None:
        self.client = client
        self.workflow_id = workflow_id
        self._on_unused = on_unused  # takes it out of the process's bells
        self.users = 0
        self.wakers: weakref.WeakSet[NewsWaker] = weakref.WeakSet()  # woken as the state moves
        self._state: BellState = None
        self._task: asyncio.Task[None] | None = None

    def state(self) -> BellState:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._follow())
        return self._state

    def release(self) -> None:
        self.users -= 1
        if self.users > 0:
            return
        self._on_unused()
        if self._task is not None:
            with contextlib.suppress(RuntimeError):  # its loop already closed
                self._task.cancel()
            self._task = None

    async def _follow(self) -> None:
        while True:
            try:
                if await self._follow_run():
                    continue  # continued as new: the next run at once
                await self._until_reopened()
            except Exception:
                # Not started yet, the server restarting, a permission refused: the followers'
                # timers cover for it (at once: calls here are not retried, so that a server
                # gone shows as soon as the followers' own asks fail) until a poll goes through.
                self._state = None
                await asyncio.sleep(RETRY_S)

    async def _follow_run(self) -> bool:
        """Until the newest run closes; whether it continued as new."""
        # No run id: the newest run; the page token then keeps to that run.
        request = GetWorkflowExecutionHistoryRequest(
            namespace=self.client.namespace,
            execution=WorkflowExecution(workflow_id=self.workflow_id),
            wait_new_event=True,
        )
        run = 0
        while True:
            page = await self.client.workflow_service.get_workflow_execution_history(request, retry=False)
            last: HistoryEvent | None = None
            for event in page.history.events:
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                    started = event.workflow_execution_started_event_attributes
                    run = zlib.crc32(started.original_execution_run_id.encode())
                if event.event_type in _MOVES:
                    last = event
            if last is not None:
                self._state = (0, run, last.event_id)
                for waker in list(self.wakers):
                    waker.wake()
            if not page.next_page_token:
                return (
                    last is not None
                    and last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
                )
            request.next_page_token = page.next_page_token
            if page.history.events:
                await asyncio.sleep(POLL_GAP_S)

    async def _until_reopened(self) -> None:
        """A closed session's workflow, until a new run starts under its id (`tempi -c`)."""
        request = DescribeWorkflowExecutionRequest(
            namespace=self.client.namespace, execution=WorkflowExecution(workflow_id=self.workflow_id)
        )
        while True:
            await asyncio.sleep(CLOSED_LOOK_S)
            described = await self.client.workflow_service.describe_workflow_execution(request, retry=False)
            if described.workflow_execution_info.status == WORKFLOW_EXECUTION_STATUS_RUNNING:
                return


# Per event loop (a bell's poll runs in one), client and workflow id.
_bells: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[int, str], HistoryBell]] = (
    weakref.WeakKeyDictionary()
)


def history_bell(client: Client, workflow_id: str, owner: object) -> tuple[HistoryBell, Callable[[], None]]:
    """This process's bell for the workflow, and how `owner` lets go of it (done by itself
    when `owner` is collected; at most once either way)."""
    bells = _bells.setdefault(asyncio.get_running_loop(), {})
    key = (id(client), workflow_id)  # the bell holds the client: its id is not reused meanwhile
    bell = bells.get(key)
    if bell is None:
        bell = bells[key] = HistoryBell(client, workflow_id, lambda: bells.pop(key, None))
    bell.users += 1
    return bell, weakref.finalize(owner, bell.release)
