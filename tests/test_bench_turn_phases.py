"""`bench overhead`'s table of where a round trip goes: the phases read from a real workflow's
history and its activities' times add up to each round trip, and a round trip that took the
workflow more than one task is counted out rather than folded into the phases."""

from __future__ import annotations

import uuid

from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.worker import Worker

from bench.round_trip_workflow import NOOP_ACTIVITY, RoundTrips, noop
from bench.turn_phases import PHASES, ActivityRun, round_trip_phases, workflow_events

ROUNDS = 6


async def test_the_phases_of_each_round_trip_add_up_to_it(temporal_client: Client) -> None:
    queue = f"phases-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=queue, workflows=[RoundTrips], activities=[noop]):
        starts = await temporal_client.execute_workflow(RoundTrips.run, ROUNDS, id=queue, task_queue=queue)
    runs = [ActivityRun(NOOP_ACTIVITY, s, s) for s in starts]
    events = await workflow_events(temporal_client, queue)

    measured = round_trip_phases(events, runs, NOOP_ACTIVITY)

    assert (measured["round_trips"], measured["left_out"]) == (ROUNDS - 1, 0)
    phases = measured["phases"]
    assert phases["tool call"]["median_ms"] == 0  # a no-op workflow runs no local activity
    assert all(phases[name]["median_ms"] > 0 for name in PHASES if name != "tool call")
    # One round trip alone: its phases cover the time from one start to the next.
    one = round_trip_phases(events, runs[:2], NOOP_ACTIVITY)["phases"]
    gap_ms = (starts[1] - starts[0]) * 1000
    assert abs(sum(one[name]["median_ms"] for name in PHASES) - gap_ms) < 0.1


def _event(kind: EventType.ValueType, at: float) -> HistoryEvent:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(at * 1e9))
    return HistoryEvent(event_type=kind, event_time=stamp)


def test_a_round_trip_with_a_second_workflow_task_is_left_out_and_a_local_tool_is_its_own_phase() -> None:
    done, started, finished = (
        EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    )
    events = [
        # First round trip: one task, with a 4 ms local read in it.
        _event(done, 1.002),
        _event(started, 1.005),
        _event(finished, 1.015),
        # Second: the command was handed off, so a second task ran before the next model call.
        _event(done, 2.002),
        _event(started, 2.005),
        _event(finished, 2.008),
        _event(done, 2.300),
        _event(started, 2.303),
        _event(finished, 2.306),
    ]
    runs = [
        ActivityRun("call_llm", 0.900, 1.000),
        ActivityRun("run_tool", 1.008, 1.012, local=True),
        ActivityRun("call_llm", 1.020, 2.000),
        ActivityRun("run_tool_briefly", 2.006, 2.007, local=True),
        ActivityRun("await_tool", 2.010, 2.298),
        ActivityRun("call_llm", 2.310, 2.400),
    ]

    measured = round_trip_phases(events, runs, "call_llm")

    assert (measured["round_trips"], measured["left_out"]) == (1, 1)
    assert {name: measured["phases"][name]["median_ms"] for name in PHASES} == {
        "to the server": 2.0,
        "task dispatched": 3.0,
        "workflow task": 6.0,
        "tool call": 4.0,
        "next started": 5.0,
    }
