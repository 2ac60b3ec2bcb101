"""`tempi web` under load: (a) how long a streamed delta takes from the worker writing it to
an SSE client of the console receiving it, and (b) the worker's CPU per turn with 0 and with
20 SSE clients following one running session (the issue's goals: < 100 ms; 20 browsers add
< 10%).

The "browsers" are plain HTTP clients (httpx, streaming) reading the console's event stream,
the stream a page's EventSource reads: what a browser adds on the console's side is the same
stream, and the worker never sees browsers at all. All clients run in this process.

A turn is one prompt answered by one streamed text answer of marked chunks ("t003c017 ").
The write time of each chunk is when a thread here, reading the session's live file every
millisecond, first sees it: at most ~1 ms after the worker's write, so the latency shown is
at most that much short. Its receive time is when a client first sees that marker in a
`data:` line."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.report import percentile, print_table, summary_ms
from bench.rig import (
    PYTHON,
    DevServer,
    ScriptedServerProcess,
    WorkerProcess,
    clean_env,
    cpu_seconds,
    write_models_json,
)
from bench.sessions import DEFAULT_TOOLS, model_for, prepare_workspace
from tempi.client import SessionClient, SessionOptions, SessionService
from tempi.store.session_store import SessionStore
from tempi.store.sidecar import sidecar_dir
from tempi.workers.temporal_client import connect

CHUNKS = 60  # streamed pieces per answer
CHUNK_DELAY_MS = 20  # between pieces: a 1.2 s answer, a fast model's pace
CLIENTS = 20
MARK = re.compile(r"t\d{3}c\d{3} ")
QUEUE = "bench-web"


def _answer(turn: int) -> str:
    return "".join(f"t{turn:03d}c{chunk:03d} " for chunk in range(CHUNKS))


def scenario(turns: int) -> dict[str, Any]:
    """Turn i answers the i-th prompt (by the assistant messages already in the request)."""
    return {
        "turns": [
            {"text": _answer(i), "chunk_size": 9, "chunk_delay_ms": CHUNK_DELAY_MS} for i in range(turns)
        ]
    }


class LiveFileWatch:
    """When each marked chunk first shows in the session's live files (the worker's writes)."""

    def __init__(self, sidecar: Path) -> None:
        self.live = sidecar / "live"
        self.seen: dict[str, float] = {}
        self._offsets: dict[Path, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(FileNotFoundError):
                for path in self.live.iterdir():
                    self._read(path)
            time.sleep(0.001)

    def _read(self, path: Path) -> None:
        try:
            with open(path, "rb") as f:
                f.seek(self._offsets.get(path, 0))
                chunk = f.read()
        except FileNotFoundError:
            return
        now = time.monotonic()
        end = chunk.rfind(b"\n") + 1
        self._offsets[path] = self._offsets.get(path, 0) + end
        for mark in MARK.findall(chunk[:end].decode("utf-8", "replace")):
            self.seen.setdefault(mark, now)

    def __enter__(self) -> LiveFileWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class SseClient:
    """One page's event stream; `seen` is when each marker first arrived."""

    seen: dict[str, float] = field(default_factory=dict)
    connected: asyncio.Event = field(default_factory=asyncio.Event)

    async def follow(self, http: httpx.AsyncClient, url: str) -> None:
        async with http.stream("GET", url) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                now = time.monotonic()
                if '"op": "state"' in line:
                    self.connected.set()
                for mark in MARK.findall(line):
                    self.seen.setdefault(mark, now)


@dataclass
class Console:
    proc: subprocess.Popen[str]
    base: str
    token: str


def start_console(home: Path, address: str, tmp: Path) -> Console:
    proc = subprocess.Popen(
        [PYTHON, "-m", "tempi", "web", "--port", "0"],
        cwd=tmp,
        env=clean_env(home, address),
        stdout=subprocess.PIPE,
        stderr=open(tmp / "console.log", "ab"),  # noqa: SIM115 - owned by the child
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    found = re.search(r"(http://[^/\s]+)/\?token=(\S+)", proc.stdout.readline())
    if found is None:
        proc.kill()
        raise RuntimeError(f"tempi web did not start; see {tmp / 'console.log'}")
    return Console(proc, found.group(1), found.group(2))


@contextlib.asynccontextmanager
async def following(console: Console, session_id: str, n: int) -> AsyncIterator[list[SseClient]]:
    """`n` clients on the session's event stream, each past its first state."""
    url = f"{console.base}/api/sessions/{session_id}/events"
    limits = httpx.Limits(max_connections=n + 1)
    async with httpx.AsyncClient(
        headers={"X-Tempi-Token": console.token}, timeout=httpx.Timeout(10, read=None), limits=limits
    ) as http:
        clients = [SseClient() for _ in range(n)]
        tasks = [asyncio.create_task(c.follow(http, url)) for c in clients]
        try:
            async with asyncio.timeout(60):
                await asyncio.gather(*(c.connected.wait() for c in clients))
            yield clients
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


@dataclass
class Turn:
    worker_cpu_s: float
    console_cpu_s: float
    server_cpu_s: float
    wall_s: float


async def _turn(session: SessionClient, path: Path, index: int, pids: tuple[int, int, int]) -> Turn:
    """One prompt and its streamed answer, with the CPU each process spent on it (from the
    prompt until the answer is in the file and a moment after, for what follows a run)."""
    before = [cpu_seconds(pid) for pid in pids]
    started = time.monotonic()
    await session.prompt(f"turn {index}")
    last = f"t{index:03d}c{CHUNKS - 1:03d}"
    deadline = started + 60
    while last not in _last_line(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"turn {index} did not finish within 60 s")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    after = [cpu_seconds(pid) for pid in pids]
    spent = [a - b for a, b in zip(after, before, strict=True)]
    worker, console, server = spent
    return Turn(worker, console, server, wall_s=time.monotonic() - started)


def _last_line(path: Path) -> str:
    try:
        return path.read_text(errors="replace").rstrip("\n").rsplit("\n", 1)[-1]
    except FileNotFoundError:
        return ""


def _latencies(written: dict[str, float], clients: list[SseClient], marks: list[str]) -> list[float]:
    return [c.seen[m] - written[m] for c in clients for m in marks if m in c.seen and m in written]


def _marks(first: int, count: int) -> list[str]:
    return [f"t{t:03d}c{c:03d} " for t in range(first, first + count) for c in range(CHUNKS)]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


async def run(quick: bool, profile: bool = False) -> dict[str, Any]:
    del profile
    turns = 4 if quick else 10
    phases = [0, CLIENTS, 0, CLIENTS]  # alternated, so drift shows instead of hiding in one phase
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-web-"))
    home = tmp / "home"
    total = 1 + turns * len(phases) + 1
    with (
        ScriptedServerProcess(tmp / "llm", {"web": scenario(total)}) as llm,
        DevServer(tmp / "temporal") as dev,
    ):
        write_models_json(home, llm.base_url, "web")
        worker = WorkerProcess(home, dev.address, QUEUE, log=tmp / "worker.log").start()
        console = start_console(home, dev.address, tmp)
        try:
            worker.wait_ready()
            client = await connect(dev.address)
            service = SessionService(client, SessionStore(home / "sessions"), QUEUE)
            cwd = tmp / "ws"
            prepare_workspace(cwd)
            session = await service.start(
                SessionOptions(
                    cwd=str(cwd),
                    model=model_for(llm.url_for("web")),
                    system_prompt="You are a test agent.",
                    tools=DEFAULT_TOOLS,
                ),
                session_dir=home / "sessions" / "bench",
            )
            assert session.config is not None
            path = Path(session.config.session_path)
            pids = (worker.pid, console.proc.pid, dev.pid)
            index = 0
            await _turn(session, path, index, pids)  # warm-up: imports, first connections
            index += 1
            by_clients: dict[int, list[Turn]] = {0: [], CLIENTS: []}
            latency: dict[int, list[float]] = {1: [], CLIENTS: []}
            with LiveFileWatch(sidecar_dir(path, session.session_id)) as watch:
                async with following(console, session.session_id, 1) as one:
                    first = index
                    await _turn(session, path, index, pids)
                    index += 1
                    latency[1] = _latencies(watch.seen, one, _marks(first, 1))
                for n in phases:
                    first = index
                    if n:
                        async with following(console, session.session_id, n) as clients:
                            for _ in range(turns):
                                by_clients[n].append(await _turn(session, path, index, pids))
                                index += 1
                            latency[n] += _latencies(watch.seen, clients, _marks(first, turns))
                    else:
                        for _ in range(turns):
                            by_clients[n].append(await _turn(session, path, index, pids))
                            index += 1
        finally:
            console.proc.terminate()
            console.proc.wait(10)
            worker.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return _report(by_clients, latency)


def _report(by_clients: dict[int, list[Turn]], latency: dict[int, list[float]]) -> dict[str, Any]:
    base = _mean([t.worker_cpu_s for t in by_clients[0]])
    cpu_rows = []
    results: dict[str, Any] = {"chunks_per_turn": CHUNKS, "chunk_delay_ms": CHUNK_DELAY_MS, "cpu": {}}
    for n, turns in by_clients.items():
        worker = _mean([t.worker_cpu_s for t in turns])
        row = {
            "turns": len(turns),
            "worker_cpu_ms_per_turn": round(worker * 1000, 1),
            "worker_added_pct": round((worker / base - 1) * 100, 1),
            "console_cpu_ms_per_turn": round(_mean([t.console_cpu_s for t in turns]) * 1000, 1),
            "server_cpu_ms_per_turn": round(_mean([t.server_cpu_s for t in turns]) * 1000, 1),
            "turn_wall_s": round(_mean([t.wall_s for t in turns]), 2),
        }
        results["cpu"][str(n)] = row
        cpu_rows.append(
            [
                n,
                row["turns"],
                row["worker_cpu_ms_per_turn"],
                f"{row['worker_added_pct']:+.1f}%",
                row["console_cpu_ms_per_turn"],
                row["server_cpu_ms_per_turn"],
                row["turn_wall_s"],
            ]
        )
    print_table(
        f"Worker CPU per turn ({CHUNKS} chunks streamed {CHUNK_DELAY_MS} ms apart) by SSE clients following",
        ["clients", "turns", "worker ms", "added", "console ms", "temporal ms", "wall s"],
        cpu_rows,
    )
    lat_rows = []
    results["latency"] = {}
    for n, values in latency.items():
        if not values:
            continue
        summary = summary_ms(values)
        p99 = round(percentile(values, 99) * 1000, 1)
        results["latency"][str(n)] = {**summary, "p99_ms": p99, "samples": len(values)}
        lat_rows.append([n, len(values), summary["median_ms"], p99, round(max(values) * 1000, 1)])
    print_table(
        "Delta latency, live file written -> SSE client received (ms)",
        ["clients", "samples", "median", "p99", "max"],
        lat_rows,
    )
    return results
