"""N concurrent sessions on one worker process: turns per second, p99 turn latency and
the worker's peak resident memory (N = 1, 10, 50, 100; 1 and 10 with --quick)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.overhead import MODEL_ACTIVITY, load_timings, profile_summary, turn_breakdown
from bench.report import percentile, print_table, summary_ms
from bench.rig import DevServer, RssSampler, ScriptedServerProcess, WorkerProcess, write_models_json
from bench.sessions import scripted_turns, start_direct_session, wait_all_done
from tempi.workers.temporal_client import connect

TURNS = 10  # tool turns per session, plus the final answer


async def run_sessions(client: Client, queue: str, n: int, directory: Path, url: str, poll_s: float) -> float:
    """Start `n` sessions on `queue` at once and wait until every one has answered; the
    seconds that took."""
    started = time.monotonic()
    sessions = await asyncio.gather(*(start_direct_session(client, queue, directory, url) for _ in range(n)))
    await wait_all_done([s.session_path for s in sessions], timeout_s=120 + n * TURNS * 1.5, poll_s=poll_s)
    return time.monotonic() - started


def model_turns(timings: Path, since: float) -> tuple[int, list[float]]:
    """The model calls the timed worker logged since `since`, and each turn's wall time (s)."""
    by_workflow = load_timings(timings, since)
    latencies = [t["wall"] for records in by_workflow.values() for t in turn_breakdown(records)]
    calls = sum(1 for records in by_workflow.values() for r in records if r["type"] == MODEL_ACTIVITY)
    return calls, latencies


async def _one_level(
    n: int, tmp: Path, dev: DevServer, llm: ScriptedServerProcess, profile: bool
) -> dict[str, Any]:
    home = tmp / f"home-{n}"
    write_models_json(home, llm.base_url, "throughput")
    queue = f"bench-throughput-{n}"
    timings = tmp / f"timings-{n}.jsonl"
    profile_path = tmp / f"worker-{n}.prof" if profile else None
    worker = WorkerProcess(
        home, dev.address, queue, log=tmp / f"worker-{n}.log", timings=timings, profile=profile_path
    )
    worker.start()
    try:
        worker.wait_ready()
        sampler = RssSampler(worker.pid).start()
        client = await connect(dev.address)
        since = time.time()
        elapsed = await run_sessions(client, queue, n, tmp / f"n{n}", llm.url_for("throughput"), poll_s=0.1)
        peak_kb = sampler.stop()
    finally:
        worker.stop()
    llm_calls, latencies = model_turns(timings, since)
    result = {
        "sessions": n,
        "turns": llm_calls,
        "seconds": round(elapsed, 2),
        "turns_per_s": round(llm_calls / elapsed, 1),
        "turn_latency": summary_ms(latencies),
        "p99_turn_ms": round(percentile(latencies, 99) * 1000, 1),
        "peak_worker_rss_mb": round(peak_kb / 1024, 1),
    }
    if profile_path is not None and profile_path.exists():
        result["profile"] = profile_summary(profile_path)
    return result


async def run(quick: bool, profile: bool = False) -> dict[str, Any]:
    levels = [1, 10] if quick else [1, 10, 50, 100]
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-throughput-"))
    results: list[dict[str, Any]] = []
    with (
        ScriptedServerProcess(tmp / "llm", {"throughput": scripted_turns("tool", TURNS)}) as llm,
        DevServer(tmp / "temporal") as dev,
    ):
        for n in levels:
            results.append(await _one_level(n, tmp, dev, llm, profile))
    print_table(
        f"Concurrent sessions on one worker ({TURNS} read-tool turns + 1 answer each)",
        ["sessions", "turns", "seconds", "turns/s", "turn med ms", "turn p99 ms", "peak worker RSS MB"],
        [
            [
                r["sessions"],
                r["turns"],
                r["seconds"],
                r["turns_per_s"],
                r["turn_latency"]["median_ms"],
                r["p99_turn_ms"],
                r["peak_worker_rss_mb"],
            ]
            for r in results
        ],
    )
    for r in results:
        if "profile" in r:
            print(f"\nWorker profile at N={r['sessions']} (top by own time):")
            for row in r["profile"][:12]:
                print(
                    f"  {row['tottime_s']:8.3f}s own {row['cumtime_s']:8.3f}s cum {row['calls']:8d}  {row['function']}"
                )
    shutil.rmtree(tmp, ignore_errors=True)
    return {"turns_per_session": TURNS + 1, "levels": results}
