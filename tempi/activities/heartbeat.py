"""Heartbeats for activities that run long enough to be aborted or to outlive their worker."""

from __future__ import annotations

import asyncio
import contextlib

from temporalio import activity

# An abort reaches an activity only in the answer to a heartbeat, so the beat (and the
# worker's heartbeat throttle, HEARTBEAT_THROTTLE in workers/worker.py) sets how long a
# killed command keeps running: pi kills within a few hundredths of a second (`python -m
# bench abort`), tempi within a beat.
HEARTBEAT_EVERY_S = 0.1


class Heartbeater:
    """Heartbeats on a timer so a dead worker is noticed and cancellation is delivered."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Heartbeater:
        self._task = asyncio.create_task(self._beat())
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _beat(self) -> None:
        if activity.info().is_local:
            return  # the server knows nothing of a local activity; the workflow task is its lease
        # The first beat waits one period: the SDK sends a first beat at once, and most model
        # calls and tools end within it, so beating at the start costs the server a write per
        # call while cancellation arrives no sooner (the next beat is held to the period).
        while True:
            await asyncio.sleep(HEARTBEAT_EVERY_S)
            activity.heartbeat()
