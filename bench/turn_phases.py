"""Where one round trip of a turn goes, phase by phase: the server's history event times joined
with the worker's activity log, both on this machine's clock. The same phases of Temporal
alone (a workflow awaiting a no-op activity) stand beside tempi's, so what tempi adds shows
in the phase it is added to.

A round trip runs from the end of one model call (or no-op) activity to the start of the next:
  to the server     the activity's end to its ActivityTaskCompleted event (the completion's
                    RPC, the SDK's and the network's share);
  task dispatched   that event to WorkflowTaskStarted (the server persists the completion and
                    hands the workflow task to the worker's sticky poll);
  workflow task     WorkflowTaskStarted to WorkflowTaskCompleted less the tool call: the task
                    reaching the worker, its activations, the local activity's dispatch and
                    the completion's RPC;
  tool call         the local activities (read, or bash within its brief window) the task ran;
  next started      WorkflowTaskCompleted to the next activity's start (the server persists
                    the task and hands back the next activity eagerly).
Round trips whose workflow took more than one task (a command handed off to `await_tool`, a
steer) are left out, and counted."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from bench.report import summary_ms

PHASES = ("to the server", "task dispatched", "workflow task", "tool call", "next started")


@dataclass(frozen=True)
class ActivityRun:
    """One activity as the worker ran it (wall clock, seconds)."""

    type: str
    start: float
    end: float
    local: bool = False


def event_time(event: HistoryEvent) -> float:
    return event.event_time.seconds + event.event_time.nanos / 1e9


def _times(events: Sequence[HistoryEvent], kind: EventType.ValueType) -> list[float]:
    return sorted(event_time(e) for e in events if e.event_type == kind)


def round_trip_phases(
    events: Sequence[HistoryEvent], runs: Sequence[ActivityRun], between: str
) -> dict[str, Any]:
    """Each phase's seconds over the round trips from one `between` activity to the next,
    as a summary in ms, and how many round trips were measured and left out."""
    completed = _times(events, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    task_started = _times(events, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED)
    task_completed = _times(events, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
    ends = sorted((r for r in runs if r.type == between), key=lambda r: r.start)
    tools = [r for r in runs if r.local]
    phases: dict[str, list[float]] = {name: [] for name in PHASES}
    left_out = 0
    for this, following in itertools.pairwise(ends):
        done = _first_at_or_after(completed, this.end)
        tasks = _within(task_started, done, following.start) if done is not None else []
        finished = _within(task_completed, tasks[0], following.start) if tasks else []
        if done is None or len(tasks) != 1 or len(finished) != 1:
            left_out += 1
            continue
        (task,), (task_done,) = tasks, finished
        tool_s = sum(r.end - r.start for r in tools if task <= r.start < task_done)
        phases["to the server"].append(done - this.end)
        phases["task dispatched"].append(task - done)
        phases["workflow task"].append(task_done - task - tool_s)
        phases["tool call"].append(tool_s)
        phases["next started"].append(following.start - task_done)
    return {
        "phases": {name: summary_ms(values) for name, values in phases.items()},
        "round_trips": len(phases["next started"]),
        "left_out": left_out,
    }


def _first_at_or_after(times: list[float], moment: float) -> float | None:
    at = bisect.bisect_left(times, moment)
    return times[at] if at < len(times) else None


def _within(times: list[float], start: float, end: float) -> list[float]:
    """The sorted `times` in [start, end)."""
    return times[bisect.bisect_left(times, start) : bisect.bisect_left(times, end)]


async def workflow_events(client: Client, workflow_id: str) -> list[HistoryEvent]:
    """Every event of the workflow's runs, oldest run first: a session that continued as new
    carries its turns over several runs."""
    runs: list[list[HistoryEvent]] = []
    run_id: str | None = None
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        runs.append(list(history.events))
        started = history.events[0].workflow_execution_started_event_attributes
        if not started.continued_execution_run_id:
            return [event for run in reversed(runs) for event in run]
        run_id = started.continued_execution_run_id


def activity_runs(records: Sequence[dict[str, Any]]) -> list[ActivityRun]:
    """The timed worker's log lines (bench/timed_worker.py) of one workflow."""
    return [ActivityRun(r["type"], r["start"], r["end"], r.get("local", False)) for r in records]
