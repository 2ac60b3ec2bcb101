"""Whether a run is going and how it is stopped: the flags the handlers flip and the
activities an abort cancels."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


class RunControl:
    def __init__(self) -> None:
        self.streaming = False
        self.abort_requested = False
        self.shutdown_requested = False
        # Set when the run continues as new mid-prompt: it goes on, still streaming, there.
        self.handed_off = False
        self.in_flight: list[asyncio.Future[Any]] = []
        # Fire-and-forget work (signals to children) that must end before a hand-off.
        self.background: set[asyncio.Future[Any]] = set()

    async def track(self, task: asyncio.Future[T]) -> T:
        """Await an activity that an abort cancels."""
        self.in_flight.append(task)
        try:
            return await task
        finally:
            self.in_flight.remove(task)

    def cancel_in_flight(self) -> None:
        for task in list(self.in_flight):
            task.cancel()

    def in_background(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
