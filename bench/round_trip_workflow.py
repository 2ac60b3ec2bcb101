"""A workflow that awaits a no-op activity round after round: Temporal's own cost of one
round trip, with none of tempi's code in it. Kept apart from the bench's other modules so
the workflow sandbox imports nothing but this."""

from __future__ import annotations

import time
from datetime import timedelta

from temporalio import activity, workflow

NOOP_ACTIVITY = "bench_noop"


@activity.defn(name=NOOP_ACTIVITY)
async def noop() -> float:
    """When the activity ran (wall clock), as tempi's timed worker logs its activities."""
    return time.time()


@workflow.defn(name="BenchRoundTrips")
class RoundTrips:
    @workflow.run
    async def run(self, rounds: int) -> list[float]:
        starts: list[float] = []
        for _ in range(rounds):
            starts.append(await workflow.execute_activity(noop, start_to_close_timeout=timedelta(seconds=30)))
        return starts
