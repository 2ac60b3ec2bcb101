"""`python -m bench.alternate CHECKOUT [CHECKOUT ...] [--sessions N] [--rounds R]`: the
throughput bench for telling two versions of tempi apart on a box whose speed drifts.

On a shared VM one version's turns per second can move by 15% from one minute to the next,
more than most levers are worth, so running one version's bench and then the other's
compares two moments, not two versions. Here every round starts a fresh timed worker from
each checkout in turn (the order flips every round) against the same dev server and
scripted model, runs N sessions of 10 read turns, and reads the worker's and the server's
CPU from /proc. The medians over the rounds are the comparison.

A checkout is a tempi tree, e.g. `git worktree add /tmp/before <rev>`; its worker runs on
this environment's Python and packages."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.report import machine, median, percentile, print_table, write_results
from bench.rig import DevServer, ScriptedServerProcess, WorkerProcess, cpu_seconds, write_models_json
from bench.sessions import scripted_turns
from bench.throughput import TURNS, model_turns, run_sessions
from tempi.workers.temporal_client import connect


async def one_round(
    checkout: Path, label: str, n: int, tmp: Path, dev: DevServer, client: Client, llm: ScriptedServerProcess
) -> dict[str, Any]:
    home = tmp / f"home-{label}"
    write_models_json(home, llm.base_url, "alternate")
    timings = tmp / f"timings-{label}.jsonl"
    worker = WorkerProcess(
        home,
        dev.address,
        f"alternate-{label}",
        log=tmp / f"worker-{label}.log",
        timings=timings,
        project=checkout,
    )
    worker.start()
    try:
        worker.wait_ready()
        worker_cpu, server_cpu = cpu_seconds(worker.pid), cpu_seconds(dev.pid)
        since = time.time()
        elapsed = await run_sessions(
            client, f"alternate-{label}", n, tmp / f"n-{label}", llm.url_for("alternate"), poll_s=0.05
        )
        worker_cpu, server_cpu = cpu_seconds(worker.pid) - worker_cpu, cpu_seconds(dev.pid) - server_cpu
    finally:
        worker.stop()
    calls, latencies = model_turns(timings, since)
    return {
        "turns_per_s": calls / elapsed,
        "worker_cpu_ms_per_turn": worker_cpu / calls * 1000,
        "server_cpu_ms_per_turn": server_cpu / calls * 1000,
        "turn_median_ms": median(latencies) * 1000,
        "turn_p99_ms": percentile(latencies, 99) * 1000,
    }


async def run(checkouts: list[Path], sessions: int, rounds: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-alternate-"))
    by_checkout: dict[str, list[dict[str, Any]]] = {str(c): [] for c in checkouts}
    try:
        with (
            ScriptedServerProcess(tmp / "llm", {"alternate": scripted_turns("tool", TURNS)}) as llm,
            DevServer(tmp / "temporal") as dev,
        ):
            client = await connect(dev.address)
            for number in range(rounds):
                order = checkouts if number % 2 == 0 else checkouts[::-1]
                for index, checkout in enumerate(order):
                    row = await one_round(checkout, f"{number}-{index}", sessions, tmp, dev, client, llm)
                    by_checkout[str(checkout)].append(row)
                    print(
                        f"round {number + 1}/{rounds} {checkout}: {row['turns_per_s']:.1f} turns/s, CPU per turn "
                        f"worker {row['worker_cpu_ms_per_turn']:.1f} ms, server {row['server_cpu_ms_per_turn']:.1f} ms",
                        flush=True,
                    )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    medians = {
        checkout: {key: round(median([r[key] for r in rows]), 1) for key in rows[0]}
        for checkout, rows in by_checkout.items()
    }
    print_table(
        f"Alternating workers, {sessions} sessions of {TURNS} read turns + 1 answer, median of {rounds} rounds",
        ["checkout", "turns/s", "worker CPU ms/turn", "server CPU ms/turn", "turn med ms", "turn p99 ms"],
        [
            [
                checkout,
                m["turns_per_s"],
                m["worker_cpu_ms_per_turn"],
                m["server_cpu_ms_per_turn"],
                m["turn_median_ms"],
                m["turn_p99_ms"],
            ]
            for checkout, m in medians.items()
        ],
    )
    return {"sessions": sessions, "rounds": rounds, "medians": medians, "rounds_by_checkout": by_checkout}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.alternate",
        description="Throughput of two or more tempi checkouts, alternating fresh workers against one dev "
        "server so that the box's drift falls on both alike.",
    )
    parser.add_argument("checkouts", nargs="+", type=Path, help="tempi trees, e.g. from `git worktree add`")
    parser.add_argument("--sessions", type=int, default=20, help="concurrent sessions per round (default 20)")
    parser.add_argument(
        "--rounds", type=int, default=4, help="rounds; each runs every checkout once (default 4)"
    )
    args = parser.parse_args(argv)
    missing = [c for c in args.checkouts if not (c / "bench" / "timed_worker.py").is_file()]
    if missing:
        parser.error(f"not a tempi checkout with bench/timed_worker.py: {', '.join(map(str, missing))}")
    if args.sessions < 1 or args.rounds < 1:
        parser.error("--sessions and --rounds must be at least 1")
    m = machine()
    print(f"machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, Python {m['python']}")
    checkouts = [c.resolve() for c in args.checkouts]
    results = asyncio.run(run(checkouts, args.sessions, args.rounds))
    print(f"  -> {write_results('alternate', results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
