"""What watching a session costs: one session of read turns, of bash turns whose command
runs 0.3 s, and of read turns whose model writes for about half a second, followed by 0, 1
and 20 watchers (shared EventFollowers, as `tempi attach`
watches: they take turns asking the workflow), with the worker's and the server's CPU per turn
and the worker's query count per turn beside each; then the same for 3 s of the session
sitting idle under its watchers (worker + server CPU a second). The watchers run twice: sharing the
worker's home, so they hear its doorbell (store/doorbell.py); from another home, where the
workflow's history is their bell (client/history_bell.py); and, for comparison, from another
home with the history's poll refused, asking on their timer as all watchers elsewhere did
before the history bell."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.report import print_table
from bench.rig import DevServer, ScriptedServerProcess, WorkerProcess, cpu_seconds, write_models_json
from bench.sessions import NOTES, start_direct_session, wait_all_done
from tempi.client.history_bell import HistoryBell
from tempi.workers.temporal_client import connect

# Tool-calling turns a session makes (then one answer); CPU is read in 10 ms ticks, so the
# full run's longer sessions give the per-turn figures a finer grain.
TURNS = 40
QUICK_TURNS = 12
# (watchers, what tells them the log moved)
ROWS = (
    (0, "doorbell"),
    (1, "doorbell"),
    (20, "doorbell"),
    (1, "history"),
    (20, "history"),
    (1, "timer"),
    (20, "timer"),
)
IDLE_S = 3.0
SETTLE_S = 2.0


# A model that writes its answer for about half a second (as a real one does for seconds),
# calling `read`: what a watcher on a timer asks the workflow about while nothing moves.
STREAMED_TEXT = " ".join(f"word{i}" for i in range(40))
STREAM = {"chunk_size": 10, "chunk_delay_ms": 15}


def _script(kind: str, turns: int) -> list[dict[str, Any]]:
    call = (
        {"name": "bash", "arguments": {"command": "sleep 0.3; echo done"}}
        if kind == "bash"
        else {"name": "read", "arguments": {"path": NOTES}}
    )
    step = {"text": STREAMED_TEXT, **STREAM} if kind == "streamed-read" else {}
    return [{"text": f"Step {i}.", **step, "tool_calls": [{**call, "id": f"c{i}"}]} for i in range(turns)] + [
        {"text": "All steps done."}
    ]


_FOLLOW_RUN = HistoryBell._follow_run


async def _refused(_: HistoryBell) -> bool:
    raise RuntimeError("the history poll is refused in this row")


async def _follow(
    client: Client, session_id: str, session_path: Path, stop: asyncio.Event, counter: list[int]
) -> None:
    from tempi.client import SessionClient

    # As `tempi attach` watches: through the file the machine's watchers share.
    follower = SessionClient(client, session_id, session_path=str(session_path)).follow(shared=True)
    original = follower._read_events

    async def counted(offset: int) -> Any:
        counter[0] += 1
        return await original(offset)

    follower._read_events = counted  # type: ignore[method-assign]
    while not stop.is_set():
        if not await follower.poll():
            await follower.wait_for_news()  # as the front ends wait between polls


async def _one(
    client: Client,
    dev: DevServer,
    worker: WorkerProcess,
    tmp: Path,
    url: str,
    watchers: int,
    bell: str,
    turns: int,
) -> dict[str, Any]:
    # The followers find the doorbell under this process's home.
    os.environ["TEMPI_HOME"] = str(worker.home if bell == "doorbell" else tmp.parent / "watchers-home")
    HistoryBell._follow_run = _refused if bell == "timer" else _FOLLOW_RUN  # type: ignore[method-assign]
    stop = asyncio.Event()
    counter = [0]
    before = {"worker": cpu_seconds(worker.pid), "server": cpu_seconds(dev.pid)}
    started = time.monotonic()
    session = await start_direct_session(client, "tempi", tmp / f"w{watchers}", url)
    assert session.session.config is not None
    tasks = [
        asyncio.create_task(
            _follow(client, session.session.config.session_id, session.session_path, stop, counter)
        )
        for _ in range(watchers)
    ]
    await wait_all_done([session.session_path], timeout_s=180, poll_s=0.05)
    wall = time.monotonic() - started
    ended = {"worker": cpu_seconds(worker.pid), "server": cpu_seconds(dev.pid)}
    # The run's last tasks (its end, the file's flush) come after its answer is in the file,
    # and the first look at the history after a second of silence beside a doorbell finds
    # them (an ask): both count with the run.
    await asyncio.sleep(SETTLE_S)
    queries_in_run = counter[0]
    after_run = {"worker": cpu_seconds(worker.pid), "server": cpu_seconds(dev.pid)}
    # Then the session sits idle with its watchers still on it.
    await asyncio.sleep(IDLE_S)
    idle = {
        role: cpu_seconds(pid) - after_run[role]
        for role, pid in (("worker", worker.pid), ("server", dev.pid))
    }
    stop.set()
    await asyncio.gather(*tasks)
    return {
        "watchers": watchers,
        "bell": bell,
        "wall_s": round(wall, 2),
        "worker_cpu_ms_per_turn": round((ended["worker"] - before["worker"]) * 1000 / turns, 1),
        "server_cpu_ms_per_turn": round((ended["server"] - before["server"]) * 1000 / turns, 1),
        "queries_per_turn": round(queries_in_run / turns, 1),
        "idle_queries_per_s": round((counter[0] - queries_in_run) / IDLE_S, 1),
        "idle_cpu_ms_per_s": round((idle["worker"] + idle["server"]) * 1000 / IDLE_S, 1),
    }


async def run(quick: bool, profile: bool = False) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-watchers-"))
    calls = QUICK_TURNS if quick else TURNS
    turns = calls + 1
    results: dict[str, Any] = {"turns": turns, "kinds": {}}
    kinds = ("read", "bash", "streamed-read")
    scenarios = {kind: _script(kind, calls) for kind in kinds}
    home_before = os.environ.get("TEMPI_HOME")
    with ScriptedServerProcess(tmp / "llm", scenarios) as llm, DevServer(tmp / "temporal") as dev:
        worker = WorkerProcess(
            tmp / "home", dev.address, "tempi", log=tmp / "worker.log", timings=tmp / "t.jsonl"
        )
        worker.start()
        try:
            worker.wait_ready()
            client = await connect(dev.address)
            for kind in kinds:
                # The worker calls only the endpoints of its own models.json.
                write_models_json(tmp / "home", llm.base_url, kind)
                url = llm.url_for(kind)
                await _one(client, dev, worker, tmp / f"warm-{kind}", url, 0, "doorbell", turns)
                results["kinds"][kind] = [
                    await _one(client, dev, worker, tmp / f"{kind}-{n}-{bell}", url, n, bell, turns)
                    for n, bell in ROWS
                ]
        finally:
            worker.stop()
            if home_before is None:
                os.environ.pop("TEMPI_HOME", None)
            else:
                os.environ["TEMPI_HOME"] = home_before
    _print(results)
    shutil.rmtree(tmp, ignore_errors=True)
    return results


def _print(results: dict[str, Any]) -> None:
    for kind, rows in results["kinds"].items():
        print_table(
            f"Watchers on one session of {kind} turns ({results['turns']} turns)",
            [
                "watchers",
                "bell",
                "wall s",
                "worker CPU ms/turn",
                "server CPU ms/turn",
                "queries/turn",
                "idle queries/s",
                "idle CPU ms/s",
            ],
            [
                [
                    r["watchers"],
                    r["bell"],
                    r["wall_s"],
                    r["worker_cpu_ms_per_turn"],
                    r["server_cpu_ms_per_turn"],
                    r["queries_per_turn"],
                    r["idle_queries_per_s"],
                    r["idle_cpu_ms_per_s"],
                ]
                for r in rows
            ],
        )
