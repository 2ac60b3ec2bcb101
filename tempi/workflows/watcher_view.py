"""How a workflow tells the worker running it what its watchers would see, so the worker
rings their doorbell (workers/doorbell_runner.py) only when that moved.

Many workflow tasks change nothing a watcher reads: a bash command handed off from a local
activity to a regular one, a flush of the session file. A ring for those
costs every watcher group a query (~5 ms of worker and server CPU) that brings nothing. A
workflow publishes, once, the log its `read_events` query serves; after each task the worker
reads its view (the log's end, busy flag and the session's leaf) and rings when that
changed, with the new events in the ring for watchers that read them there
(store/doorbell_feed.py). Publishing is a plain assignment in memory, no I/O and nothing in
history; the worker only reads the log, between activations, on the thread that runs them.
A workflow that publishes nothing keeps a ring after every task.

The worker activates a workflow on one thread at a time and instantiates it during an
activation, so a thread-local slot says which instance a `publish` belongs to.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

# The log's next offset, whether the session is busy (what a `read_events` page says besides
# its events), and the session's leaf: a move in its tree adds no event, and a console
# showing the branch should see it as soon as one that does.
WatcherView = tuple[int, bool, str | None]


class WatchedLog(Protocol):
    def watcher_view(self) -> WatcherView: ...

    def watched_events(self, from_offset: int) -> tuple[int, list[dict[str, Any]]]:
        """The events from `from_offset` (or the oldest still held, if later) to the end, and
        the offset of the first."""
        ...


class ViewSlot:
    """Where one workflow instance's published log ends up."""

    def __init__(self) -> None:
        self.log: WatchedLog | None = None


_active = threading.local()


@contextmanager
def collecting(slot: ViewSlot) -> Iterator[None]:
    """While the worker runs one activation: a `publish` lands in `slot`."""
    _active.slot = slot
    try:
        yield
    finally:
        _active.slot = None


def publish(log: WatchedLog) -> None:
    """Called by workflow code, once. Does nothing outside a worker that collects it (a
    replayer, a test's plain asyncio run)."""
    slot: ViewSlot | None = getattr(_active, "slot", None)
    if slot is not None:
        slot.log = log
