"""What a watcher whose doorbell stays silent looks at before asking the workflow.

A doorbell rings only where the workflow's worker runs with the watcher's home: a workflow
that moved to a worker elsewhere (another machine, another home) would leave it silent while
the session goes on, which is why such a watcher used to ask the workflow every second of
silence (a query its worker answers). The history grows with every workflow task wherever it
runs, and the server says how long it is without the worker (a describe): a silent bell now
costs a describe a second, and the workflow is asked only when its history grew since the
last look."""

from __future__ import annotations

import zlib
from typing import Any, Protocol

# (a hash of the run's id, the run's history length)
HistoryMark = tuple[int, int]


class Describable(Protocol):
    async def describe(self) -> Any: ...


async def history_mark(handle: Describable) -> HistoryMark:
    described = await handle.describe()
    return zlib.crc32(described.run_id.encode()), int(described.history_length)
