"""Per-turn orchestration overhead of a 50-turn scripted session, against the floor (the
same model and tool calls in a plain loop) and against pi 0.73.1 running the same script.

Where a turn's time goes, from the timed worker's activity log:
  turn wall  = start of this turn's LLM activity to the start of the next one;
  overhead   = turn wall - the floor's LLM + tool time for the same turn;
  outside    = turn wall - this turn's LLM and tool activity time (Temporal's share:
               workflow tasks, activity scheduling, the store flush), the rest of the
               overhead being work inside the activities (context rebuilt from the
               session file, entries fsynced, live deltas written).

Beside it, Temporal alone: a workflow awaiting a no-op activity on the same server
(bench/temporal_floor.py). A read turn and a bash turn pay one such round trip each, so what
a turn's overhead has above them is tempi's own; the worker's and the server's CPU per turn
(the whole run over its turns, the watching client's queries included) say who pays it, and
the round trip's phases beside Temporal alone's (bench/turn_phases.py) say where it is paid.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench import temporal_floor
from bench.report import median, print_table, summary_ms
from bench.rig import (
    DevServer,
    ScriptedServerProcess,
    WorkerProcess,
    bytecode_cache_in_use,
    clean_env,
    cpu_seconds,
    write_models_json,
)
from bench.sessions import (
    PROMPT,
    CliRun,
    FloorTurn,
    TurnKind,
    pi_json_argv,
    prepare_workspace,
    run_floor,
    run_json_cli,
    scripted_turns,
    tempi_json_argv,
)
from bench.turn_phases import PHASES, activity_runs, round_trip_phases, workflow_events
from tempi.workflows import activity_names as names

TURNS = 50
KINDS: tuple[TurnKind, ...] = ("tool", "bash")
# Server round trips a turn pays: the model call's activity only. read runs as a local
# activity inside the workflow task, and so does a bash command that ends within a moment
# (a longer one is awaited by an activity: a second round trip).
ROUND_TRIPS: dict[TurnKind, int] = {"tool": 1, "bash": 1}
MODEL_ACTIVITY = names.CALL_LLM
# The activities a tool call's time is spent in.
TOOL_ACTIVITIES = frozenset({"run_tool", "run_tool_briefly", "await_tool"})
DEFAULT_PI = "/opt/pi-0.73.1/node_modules/.bin/pi"  # where .ci/run installs it


def find_pi() -> str | None:
    candidate = os.environ.get("PI_BIN") or DEFAULT_PI
    if Path(candidate).exists():
        return candidate
    return shutil.which("pi")


def load_timings(path: Path, since: float) -> dict[str, list[dict[str, Any]]]:
    by_workflow: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if not path.exists():
        return by_workflow
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["start"] >= since:
            by_workflow[record["wf"]].append(record)
    return by_workflow


def turn_breakdown(records: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Per tool turn: wall, LLM activity and tool activity seconds (the final answer turn
    has no next LLM call to end it and is left out)."""
    llm = sorted((r for r in records if r["type"] == MODEL_ACTIVITY), key=lambda r: r["start"])
    tools = [r for r in records if r["type"] in TOOL_ACTIVITIES]
    turns = []
    for this, nxt in itertools.pairwise(llm):
        tool_s = sum(t["end"] - t["start"] for t in tools if this["start"] <= t["start"] < nxt["start"])
        turns.append(
            {"wall": nxt["start"] - this["start"], "llm": this["end"] - this["start"], "tool": tool_s}
        )
    return turns


def _worker_turn_latencies(records: list[dict[str, Any]]) -> list[float]:
    return [t["wall"] for t in turn_breakdown(records)]


def analyse(
    kind: TurnKind,
    floor: list[FloorTurn],
    worker: list[dict[str, float]],
    cli: CliRun,
    pi: CliRun | None,
    cpu_s: dict[str, float],
) -> dict[str, Any]:
    n = min(len(floor), len(worker))
    floor_turn = [floor[i].llm_s + floor[i].tool_s for i in range(n)]
    wall = [worker[i]["wall"] for i in range(n)]
    overhead = [wall[i] - floor_turn[i] for i in range(n)]
    outside = [worker[i]["wall"] - worker[i]["llm"] - worker[i]["tool"] for i in range(n)]
    inside = [overhead[i] - outside[i] for i in range(n)]
    result: dict[str, Any] = {
        "kind": kind,
        "turns": n,
        "tempi_turn": summary_ms(wall),
        "floor_turn": summary_ms(floor_turn),
        "floor_llm": summary_ms([t.llm_s for t in floor[:n]]),
        "floor_tool": summary_ms([t.tool_s for t in floor[:n]]),
        "tempi_llm_activity": summary_ms([w["llm"] for w in worker[:n]]),
        "tempi_tool_activity": summary_ms([w["tool"] for w in worker[:n]]),
        "overhead": summary_ms(overhead),
        "overhead_outside_activities": summary_ms(outside),
        "overhead_inside_activities": summary_ms(inside),
        "cpu_ms_per_turn": {who: round(seconds * 1000 / len(worker), 2) for who, seconds in cpu_s.items()},
        "tempi_cli": {
            "wall_s": round(cli.wall_s, 3),
            "exit_code": cli.exit_code,
            "turn": summary_ms(cli.turn_times()[1:-1]),
        },
    }
    if pi is not None:
        pi_turns = pi.turn_times()[1:-1]
        result["pi_cli"] = {
            "wall_s": round(pi.wall_s, 3),
            "exit_code": pi.exit_code,
            "turn": summary_ms(pi_turns),
        }
        result["ratio_tempi_over_pi_turn"] = round(median(cli.turn_times()[1:-1]) / median(pi_turns), 2)
        result["ratio_tempi_over_pi_wall"] = round(cli.wall_s / pi.wall_s, 2)
    return result


def check_run(run: CliRun, who: str, turns: int) -> None:
    if run.exit_code != 0 or len(run.turn_starts) != turns + 1:
        raise RuntimeError(
            f"{who} run failed: exit {run.exit_code}, {len(run.turn_starts)} turns\n{run.stderr[-2000:]}"
        )


async def run(quick: bool, profile: bool = False) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-overhead-"))
    scenarios: dict[str, Any] = {f"overhead-{k}": scripted_turns(k, TURNS) for k in KINDS}
    scenarios["warmup"] = scripted_turns("tool", 2)
    pi_bin = find_pi()
    results: dict[str, Any] = {
        "turns_per_session": TURNS,
        "pi": pi_bin,
        "profiled": profile,
        # The whole-session wall time includes each `tempi -p` start-up.
        "bytecode_cache": bytecode_cache_in_use(),
        "kinds": [],
    }
    home = tmp / "home"
    with ScriptedServerProcess(tmp / "llm", scenarios) as llm, DevServer(tmp / "temporal") as dev:
        timings = tmp / "timings.jsonl"
        profile_path = tmp / "worker.prof" if profile else None
        worker = WorkerProcess(
            home, dev.address, "tempi", log=tmp / "worker.log", timings=timings, profile=profile_path
        )
        worker.start()
        try:
            worker.wait_ready()
            client = await Client.connect(dev.address)
            env = clean_env(home, dev.address)
            write_models_json(home, llm.base_url, "warmup")
            prepare_workspace(tmp / "ws-warmup")
            check_run(
                run_json_cli(tempi_json_argv(PROMPT, "--no-worker"), cwd=tmp / "ws-warmup", env=env),
                "tempi warm-up",
                2,
            )
            if pi_bin:
                write_models_json(tmp / "pi-warmup", llm.base_url, "warmup")
                run_json_cli(
                    pi_json_argv(pi_bin),
                    cwd=tmp / "ws-warmup",
                    env=clean_env(PI_CODING_AGENT_DIR=str(tmp / "pi-warmup")),
                )
            for kind in KINDS:
                scenario = f"overhead-{kind}"
                for who in ("floor", "tempi", "pi"):
                    prepare_workspace(tmp / f"ws-{kind}-{who}")
                floor = await run_floor(llm.url_for(scenario), tmp / f"ws-{kind}-floor")
                write_models_json(home, llm.base_url, scenario)
                since = time.time()
                cpu_before = {"worker": cpu_seconds(worker.pid), "server": cpu_seconds(dev.pid)}
                cli = run_json_cli(
                    tempi_json_argv(PROMPT, "--no-worker"), cwd=tmp / f"ws-{kind}-tempi", env=env
                )
                cpu_s = {
                    "worker": cpu_seconds(worker.pid) - cpu_before["worker"],
                    "server": cpu_seconds(dev.pid) - cpu_before["server"],
                }
                check_run(cli, f"tempi ({kind})", TURNS)
                by_wf = load_timings(timings, since)
                if len(by_wf) != 1:
                    raise RuntimeError(f"expected one session in the worker's log, found {len(by_wf)}")
                (session_id, records), *_ = by_wf.items()
                worker_turns = turn_breakdown(records)
                phases = round_trip_phases(
                    await workflow_events(client, session_id), activity_runs(records), MODEL_ACTIVITY
                )
                pi_run = None
                if pi_bin:
                    agent_dir = tmp / f"pi-{kind}"
                    write_models_json(agent_dir, llm.base_url, scenario)
                    pi_run = run_json_cli(
                        pi_json_argv(pi_bin),
                        cwd=tmp / f"ws-{kind}-pi",
                        env=clean_env(PI_CODING_AGENT_DIR=str(agent_dir)),
                    )
                    check_run(pi_run, f"pi ({kind})", TURNS)
                results["kinds"].append(
                    {**analyse(kind, floor, worker_turns, cli, pi_run, cpu_s), "phases": phases}
                )
        finally:
            worker.stop()
        results["temporal_round_trip"] = await temporal_floor.measure(dev.address, dev.pid)
    if profile_path is not None and profile_path.exists():
        results["profile"] = profile_summary(profile_path)
    _print(results)
    shutil.rmtree(tmp, ignore_errors=True)
    return results


def profile_summary(path: Path, top: int = 25) -> list[dict[str, Any]]:
    import pstats

    stats = pstats.Stats(str(path))
    rows = []
    for (filename, line, func), (_cc, calls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append(
            {
                "function": f"{Path(filename).name}:{line}({func})",
                "file": filename,
                "calls": calls,
                "tottime_s": round(tottime, 3),
                "cumtime_s": round(cumtime, 3),
            }
        )
    rows.sort(key=lambda r: r["tottime_s"], reverse=True)
    return rows[:top]


def _print(results: dict[str, Any]) -> None:
    rows = []
    for k in results["kinds"]:
        rows.append(
            [
                k["kind"],
                k["tempi_turn"]["median_ms"],
                k["tempi_turn"]["p95_ms"],
                k["floor_turn"]["median_ms"],
                k["floor_turn"]["p95_ms"],
                k["overhead"]["median_ms"],
                k["overhead"]["p95_ms"],
                k["overhead_outside_activities"]["median_ms"],
                k["overhead_inside_activities"]["median_ms"],
            ]
        )
    print_table(
        f"Per-turn orchestration overhead, {results['turns_per_session']}-turn session (ms; worker-side)",
        [
            "turns",
            "tempi med",
            "tempi p95",
            "floor med",
            "floor p95",
            "ovh med",
            "ovh p95",
            "outside act",
            "inside act",
        ],
        rows,
    )
    cli_rows = []
    for k in results["kinds"]:
        pi = k.get("pi_cli")
        cli_rows.append(
            [
                k["kind"],
                k["tempi_cli"]["turn"]["median_ms"],
                k["tempi_cli"]["turn"]["p95_ms"],
                k["tempi_cli"]["wall_s"],
                pi["turn"]["median_ms"] if pi else "n/a",
                pi["turn"]["p95_ms"] if pi else "n/a",
                pi["wall_s"] if pi else "n/a",
                k.get("ratio_tempi_over_pi_turn", "n/a"),
                k.get("ratio_tempi_over_pi_wall", "n/a"),
            ]
        )
    print_table(
        "Same session seen by the client (--mode json), tempi vs pi 0.73.1"
        + (
            ""
            if results["bytecode_cache"]
            else "; PYTHONDONTWRITEBYTECODE is set, so every tempi start compiles"
        ),
        [
            "turns",
            "tempi turn med",
            "p95",
            "tempi wall s",
            "pi turn med",
            "p95",
            "pi wall s",
            "ratio turn",
            "ratio wall",
        ],
        cli_rows,
    )
    _print_temporal_share(results)
    _print_phases(results)
    if "profile" in results:
        print("\nWorker profile (cProfile, top by own time; the profiler itself slows the worker):")
        for row in results["profile"][:15]:
            print(
                f"  {row['tottime_s']:8.3f}s own {row['cumtime_s']:8.3f}s cum {row['calls']:8d}  {row['function']}"
            )


def _print_temporal_share(results: dict[str, Any]) -> None:
    """Temporal's own round trip on the same server, and what each turn costs above it."""
    floor = results.get("temporal_round_trip")
    if not floor:
        return
    round_trip = floor["round_trip"]["median_ms"]
    print(
        f"\nTemporal alone on this server (a workflow awaiting a no-op activity, {floor['rounds']} times): "
        f"round trip median {round_trip} ms, p95 {floor['round_trip']['p95_ms']} ms; "
        f"server CPU {floor['server_cpu_ms_per_round_trip']} ms a round trip"
    )
    for k in results["kinds"]:
        trips = ROUND_TRIPS[k["kind"]]
        above = round(k["overhead"]["median_ms"] - trips * round_trip, 2)
        cpu = k.get("cpu_ms_per_turn", {})
        print(
            f"  {k['kind']} turn: overhead {k['overhead']['median_ms']} ms = {trips} round trip(s) "
            f"+ {above} ms of tempi's own; CPU a turn (whole run, the client's queries included): "
            f"worker {cpu.get('worker', 'n/a')} ms, server {cpu.get('server', 'n/a')} ms"
        )


def _print_phases(results: dict[str, Any]) -> None:
    """Each phase of a round trip beside the same phase of Temporal alone (bench/turn_phases.py)."""
    floor = results.get("temporal_round_trip", {}).get("phases")
    columns = [("Temporal alone", floor)] if floor else []
    columns += [(f"tempi {k['kind']}", k.get("phases")) for k in results["kinds"]]
    columns = [(name, phases) for name, phases in columns if phases]
    if not columns:
        return
    rows = [[phase] + [phases["phases"][phase]["median_ms"] for _, phases in columns] for phase in PHASES]
    rows.append(
        ["sum"] + [round(sum(phases["phases"][p]["median_ms"] for p in PHASES), 2) for _, phases in columns]
    )
    counts = ", ".join(
        f"{name} {phases['round_trips']} ({phases['left_out']} left out)" for name, phases in columns
    )
    print_table(
        f"Where a round trip goes (ms, medians; history event times and the worker's log; round trips: {counts})",
        ["phase", *(name for name, _ in columns)],
        rows,
    )
