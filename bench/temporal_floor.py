"""Temporal's share of a turn on this machine, measured beside tempi's: the round trip of a
workflow awaiting a no-op activity on the same dev server, timed as tempi's turns are (one
activity's start to the next one's), with the server's CPU per round trip from /proc.

A read turn pays one such round trip, and so does a bash turn whose command ends within its
local activity's brief window, so tempi's own overhead is what a turn costs above it. The
history's event times cut each round trip into phases (bench/turn_phases.py) to set beside
tempi's."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from bench.report import summary_ms
from bench.rig import cpu_seconds
from bench.round_trip_workflow import NOOP_ACTIVITY, RoundTrips, noop
from bench.turn_phases import ActivityRun, round_trip_phases, workflow_events

ROUNDS = 100


async def measure(address: str, server_pid: int, rounds: int = ROUNDS) -> dict[str, Any]:
    client = await Client.connect(address)
    queue = f"bench-round-trips-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[RoundTrips], activities=[noop]):
        await client.execute_workflow(RoundTrips.run, 3, id=f"{queue}-warm-up", task_queue=queue)
        cpu_before = cpu_seconds(server_pid)
        starts = await client.execute_workflow(RoundTrips.run, rounds, id=queue, task_queue=queue)
        server_cpu_s = cpu_seconds(server_pid) - cpu_before
    events = await workflow_events(client, queue)
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    return {
        "rounds": rounds,
        "round_trip": summary_ms(gaps),
        "server_cpu_ms_per_round_trip": round(server_cpu_s * 1000 / rounds, 2),
        # A no-op ends as it starts.
        "phases": round_trip_phases(
            events, [ActivityRun(NOOP_ACTIVITY, s, s) for s in starts], NOOP_ACTIVITY
        ),
    }
