"""A 1,000-target pipeline (200 with --quick) of trivial scripted shards, end to end through
a real `tempi pipeline run`, 8 at once: its wall time, the CPU tempi spent per shard (its own
process and the git commands it ran; the Temporal server's beside it), the time the end of
the run spent removing worktrees, and the history of every run of the pipeline workflow
(continue-as-new keeps each one bounded), and the most worktrees git knew at once (the end
of the run removes them: until then none goes, so it is also how many were left). Then a short pipeline one shard at a time, where
nothing overlaps: the time from one shard's model answer to the next shard's model call.

The scripted model answers in about a millisecond, so what a shard costs here is tempi's
(and Temporal's) own."""

from __future__ import annotations

import itertools
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from bench.report import print_table
from bench.rig import (
    PYTHON,
    DevServer,
    ScriptedServerProcess,
    clean_env,
    cpu_seconds,
    tempi_command,
    write_models_json,
)
from tempi.pipeline import run_types as names
from tempi.testing.pipeline_many import history_runs, make_many_targets, scenario
from tempi.workers.temporal_client import connect
from tempi.workflows.activity_names import CALL_LLM

CONCURRENCY = 8


@dataclass
class Run:
    """One `tempi pipeline run`, measured."""

    targets: int
    concurrency: int
    seconds: float
    tempi_cpu_s: float  # the tempi process and the git commands it ran
    server_cpu_s: float  # the Temporal dev server
    committed: int
    runs: list[int]  # events per run of the pipeline workflow
    cleanup_s: float  # the release activity: the output and the committed shards' worktrees
    worktrees: int  # the most linked worktrees (the output's and the shards') at once
    gaps_s: list[float]  # one shard's last model answer to the next shard's first call
    cycle_s: float  # one shard's first model call to the next one's, on average


class WorktreeSampler:
    """The most linked worktrees a repository had at once, from git's records of them
    (`.git/worktrees/*`), read every 50 ms: a directory listing, no git process."""

    def __init__(self, repo: Path) -> None:
        self.records = repo / ".git" / "worktrees"
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _count(self) -> int:
        try:
            return len(os.listdir(self.records))
        except OSError:
            return 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._count())
            self._stop.wait(0.05)

    def __enter__(self) -> WorktreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _time(event: HistoryEvent) -> datetime:
    return event.event_time.ToDatetime()


async def _events(client: Client, workflow_id: str, run_id: str | None = None) -> list[HistoryEvent]:
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    return list(history.events)


def _activity_spans(events: list[HistoryEvent], activity: str) -> list[tuple[datetime, datetime]]:
    """(scheduled, closed) of every activity of that type in one history."""
    scheduled: dict[int, datetime] = {}
    spans = []
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if event.activity_task_scheduled_event_attributes.activity_type.name == activity:
                scheduled[event.event_id] = _time(event)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            began = scheduled.get(event.activity_task_completed_event_attributes.scheduled_event_id)
            if began is not None:
                spans.append((began, _time(event)))
    return spans


async def _cleanup_seconds(client: Client, workflow_id: str) -> float:
    spans = _activity_spans(await _events(client, workflow_id), names.RELEASE_WORKTREES)
    return sum((end - began).total_seconds() for began, end in spans)


async def _gaps(client: Client, workflow_id: str, shard_ids: list[str]) -> tuple[list[float], float]:
    """From each shard's last model answer to the next shard's first model call (one shard
    at a time: nothing else runs in between but tempi and Temporal), and the mean time from
    one shard's first model call to the next's (the process's start and end left out)."""
    calls = []
    for shard_id in shard_ids:
        spans = _activity_spans(await _events(client, f"{workflow_id}-shard-{shard_id}"), CALL_LLM)
        calls.append((spans[0][0], spans[-1][1]))
    calls.sort()
    gaps = [(nxt[0] - prev[1]).total_seconds() for prev, nxt in itertools.pairwise(calls)]
    return gaps, (calls[-1][0] - calls[0][0]).total_seconds() / (len(calls) - 1)


async def _pipeline(tmp: Path, targets: int, concurrency: int, profile: Path | None) -> Run:
    home = tmp / "home"
    with (
        ScriptedServerProcess(tmp / "llm", {"many": scenario(targets)}) as llm,
        DevServer(tmp / "temporal") as dev,
    ):
        write_models_json(home, llm.base_url, "many")
        repo = make_many_targets(tmp / "repo", targets, concurrency=concurrency)
        command = tempi_command("pipeline", "run", "pipeline.yaml", "--json", "out/summary.json")
        if profile is not None:
            command = [PYTHON, "-m", "cProfile", "-o", str(profile), *command[1:]]
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        server_before = cpu_seconds(dev.pid)
        started = time.monotonic()
        with WorktreeSampler(repo) as sampler:
            proc = subprocess.run(
                command,
                cwd=repo,
                env=clean_env(home, dev.address),
                capture_output=True,
                text=True,
                timeout=targets * 5 + 300,
                check=False,
            )
        elapsed = time.monotonic() - started
        server_cpu = cpu_seconds(dev.pid) - server_before
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        tempi_cpu = (children.ru_utime + children.ru_stime) - (
            children_before.ru_utime + children_before.ru_stime
        )
        if proc.returncode != 0:
            raise RuntimeError(f"tempi pipeline run exited {proc.returncode}: {proc.stderr[-2000:]}")
        summary = json.loads((repo / "out/summary.json").read_text())
        workflow_id = proc.stdout.split("workflow ")[1].split()[0]
        client = await connect(dev.address)
        runs = await history_runs(client, workflow_id, summary["runs"])
        cleanup = await _cleanup_seconds(client, workflow_id)
        gaps: list[float] = []
        cycle = 0.0
        if concurrency == 1:
            gaps, cycle = await _gaps(client, workflow_id, [s["id"] for s in summary["shards"]])
    return Run(
        targets=targets,
        concurrency=concurrency,
        seconds=elapsed,
        tempi_cpu_s=tempi_cpu,
        server_cpu_s=server_cpu,
        committed=summary["counts"].get("committed", 0),
        runs=runs,
        cleanup_s=cleanup,
        worktrees=sampler.peak,
        gaps_s=gaps,
        cycle_s=cycle,
    )


def _profile_top(path: Path, top: int = 30) -> None:
    print("\ntempi pipeline run under cProfile, top by cumulative time (the profiler slows it):")
    pstats.Stats(str(path)).sort_stats("cumulative").print_stats(top)


async def run(quick: bool, profile: bool = False) -> dict[str, Any]:
    targets = 200 if quick else 1000
    sequential_targets = 20 if quick else 50
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-pipeline-"))
    profile_path = tmp / "tempi.prof" if profile else None
    many = await _pipeline(tmp / "many", targets, CONCURRENCY, profile_path)
    one = await _pipeline(tmp / "one", sequential_targets, 1, None)
    per_shard = many.tempi_cpu_s / targets
    results = {
        "targets": targets,
        "concurrency": CONCURRENCY,
        "seconds": round(many.seconds, 1),
        "committed": many.committed,
        "runs": len(many.runs),
        "total_events": sum(many.runs),
        "largest_run_events": max(many.runs),
        "events_per_shard": round(sum(many.runs) / targets, 1),
        "wall_per_shard_s": round(many.seconds / targets, 3),
        "tempi_cpu_per_shard_s": round(per_shard, 3),
        "server_cpu_per_shard_s": round(many.server_cpu_s / targets, 3),
        "cleanup_s": round(many.cleanup_s, 2),
        "worktrees_at_end": many.worktrees,
        "sequential_targets": sequential_targets,
        "sequential_committed": one.committed,
        "sequential_per_shard_s": round(one.cycle_s, 3),
        "between_shards_median_s": round(statistics.median(one.gaps_s), 3),
        "between_shards_p90_s": round(statistics.quantiles(one.gaps_s, n=10)[-1], 3),
        "sequential_cleanup_s": round(one.cleanup_s, 2),
        "sequential_worktrees_at_end": one.worktrees,
    }
    print_table(
        f"A {targets}-target pipeline of trivial shards, {CONCURRENCY} at once",
        ["targets", "committed", "runs", "total events", "largest run events", "events/shard", "seconds"],
        [
            [
                targets,
                many.committed,
                len(many.runs),
                results["total_events"],
                results["largest_run_events"],
                results["events_per_shard"],
                results["seconds"],
            ]
        ],
    )
    print_table(
        f"{targets} shards, {CONCURRENCY} at once (tempi CPU: its process, start-up included, and the "
        "git commands it ran; server: Temporal's dev server; cleanup: the run's end removing worktrees; "
        "worktrees: the most at once, the output's included, all left for the end)",
        ["wall/shard s", "tempi CPU/shard s", "server CPU/shard s", "cleanup s", "worktrees"],
        [
            [
                results["wall_per_shard_s"],
                results["tempi_cpu_per_shard_s"],
                results["server_cpu_per_shard_s"],
                results["cleanup_s"],
                results["worktrees_at_end"],
            ]
        ],
    )
    print_table(
        f"{sequential_targets} shards, one at a time (per shard: one model call to the next shard's; "
        "between shards: a shard's model answer to the next shard's call)",
        ["per shard s", "between shards median s", "p90 s", "cleanup s", "worktrees"],
        [
            [
                results["sequential_per_shard_s"],
                results["between_shards_median_s"],
                results["between_shards_p90_s"],
                results["sequential_cleanup_s"],
                results["sequential_worktrees_at_end"],
            ]
        ],
    )
    if profile_path is not None:
        _profile_top(profile_path)
    shutil.rmtree(tmp, ignore_errors=True)
    return results
