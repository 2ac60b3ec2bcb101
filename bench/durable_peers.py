"""`python -m bench peers`: tempi's time per turn beside the durable agent frameworks built
on the same Temporal (Temporal's OpenAI Agents integration, pydantic-ai's TemporalAgent) and
beside pi, on one dev server and one scripted model.

Every contender runs the same script: a warm-up run of 2 turns, then N turns that each call
`read` on a file and N that each run `echo` through `bash`, each ending in a final answer.
The clock is the scripted server's: a turn's time is from the end of the model's answer (a
tool call) to the arrival of the next model request (bench/turn_gaps.py), which holds all an
agent does between two model calls, the tool included, and none of the model's time. tempi
runs as `bench overhead` runs it (the timed worker and `tempi -p --mode json`), pi as its
CLI, and each peer from a driver in its own venv (bench/peers/, bench/peer_envs.py).
Beside them, Temporal alone: a workflow awaiting a no-op activity on the same server."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import temporal_floor
from bench.overhead import check_run, find_pi
from bench.peer_envs import PEERS, PeerSpec, ensure_env, installed_versions, peers_root
from bench.report import median, print_table, summary_ms
from bench.rig import (
    API_KEY,
    DevServer,
    ScriptedServerProcess,
    WorkerProcess,
    clean_env,
    running,
    write_models_json,
)
from bench.sessions import (
    PROMPT,
    TurnKind,
    pi_json_argv,
    prepare_workspace,
    run_json_cli,
    scripted_turns,
    tempi_json_argv,
)
from bench.turn_gaps import conversation, load_records, turn_gaps

TURNS = 50
QUICK_TURNS = 10
WARM_UP_TURNS = 2
BASELINE = "tempi"
# The measured runs, by the name their table column has, and the tool each turn calls.
KINDS: dict[str, TurnKind] = {"read": "tool", "bash": "bash"}
RUNS = ("warm-up", *KINDS)
DRIVER_TIMEOUT_S = 900
FINAL_ANSWER = scripted_turns("tool", 0)[-1]["text"]


def route(run: str) -> str:
    """The text in a run's prompt that picks its script on the scripted server."""
    return f"bench-run={run}"


def prompt(run: str) -> str:
    return f"{PROMPT} {route(run)}"


def scenario(turns: int) -> dict[str, Any]:
    """One contender's scenario: a script per run, chosen by the run's prompt, so one base
    URL serves a contender's every run and each run's requests are told apart."""
    scripts = {"warm-up": scripted_turns("tool", WARM_UP_TURNS)}
    scripts.update({name: scripted_turns(kind, turns) for name, kind in KINDS.items()})
    return {"routes": {route(run): {"turns": script} for run, script in scripts.items()}}


def per_turn(records_path: Path, contender: str, turns: int) -> dict[str, list[float]]:
    """Each measured run's per-turn seconds for one contender (its scenario is its name)."""
    records = load_records(records_path)
    gaps: dict[str, list[float]] = {}
    for kind in KINDS:
        calls = conversation(records, contender, route(kind))
        if len(calls) != turns + 1:
            raise RuntimeError(
                f"{contender} ({kind}): the scripted server answered {len(calls)} model calls, "
                f"expected {turns + 1}"
            )
        gaps[kind] = turn_gaps(calls)
    return gaps


def compare(
    gaps: dict[str, dict[str, list[float]]], round_trip: dict[str, float] | None = None
) -> dict[str, Any]:
    """Per contender and kind: median, p90 (ms) and the ratio of its median (and p90) to
    tempi's; a peer's ratio above 1 is how many times tempi's time a turn it takes."""
    base = gaps.get(BASELINE, {})
    result: dict[str, Any] = {}
    for contender, by_kind in gaps.items():
        row: dict[str, Any] = {}
        for kind, values in by_kind.items():
            entry: dict[str, Any] = summary_ms(values)
            if base.get(kind):
                entry["ratio_median"] = round(median(values) / median(base[kind]), 2)
                entry["ratio_p90"] = round(entry["p90_ms"] / summary_ms(base[kind])["p90_ms"], 2)
            row[kind] = entry
        result[contender] = row
    if round_trip is not None:
        result["temporal_round_trip"] = round_trip
    return result


def table_rows(comparison: dict[str, Any], labels: dict[str, str]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for contender, by_kind in comparison.items():
        if contender == "temporal_round_trip":
            continue
        cells: list[Any] = [labels.get(contender, contender)]
        for kind in KINDS:
            cells += [by_kind[kind]["median_ms"], by_kind[kind]["p90_ms"]]
        cells += [by_kind[kind].get("ratio_median", "-") for kind in KINDS]
        rows.append(cells)
    trip = comparison.get("temporal_round_trip")
    if trip is not None:
        label = "Temporal alone: 1 no-op activity round trip"
        rows.append([label, *[v for _ in KINDS for v in (trip["median_ms"], trip["p90_ms"])], "-", "-"])
    return rows


def print_comparison(comparison: dict[str, Any], labels: dict[str, str], turns: int) -> None:
    header = ["per turn (ms)"]
    for kind in KINDS:
        header += [f"{kind} med", f"{kind} p90"]
    header += [f"{kind} ×tempi" for kind in KINDS]
    print_table(
        f"Time a turn: model answer's end to the next model request, {turns} turns a run, one "
        "Temporal dev server and scripted model (×tempi: median over tempi's median)",
        header,
        table_rows(comparison, labels),
    )


def run_tempi(tmp: Path, llm: ScriptedServerProcess, dev: DevServer, turns: int) -> None:
    """As `bench overhead` runs tempi: its timed worker, and `tempi -p --mode json` per run."""
    home = tmp / "tempi-home"
    write_models_json(home, llm.base_url, BASELINE)
    worker = WorkerProcess(home, dev.address, "tempi", log=tmp / "worker.log", timings=tmp / "timings.jsonl")
    with running(worker):
        worker.wait_ready()
        env = clean_env(home, dev.address)
        for run in RUNS:
            cwd = tmp / f"ws-tempi-{run}"
            prepare_workspace(cwd)
            cli = run_json_cli(tempi_json_argv(prompt(run), "--no-worker"), cwd=cwd, env=env)
            check_run(cli, f"tempi ({run})", _turns_of(run, turns))


def run_pi(pi_bin: str, tmp: Path, llm: ScriptedServerProcess, turns: int) -> None:
    agent_dir = tmp / "pi-agent"
    write_models_json(agent_dir, llm.base_url, "pi")
    env = clean_env(PI_CODING_AGENT_DIR=str(agent_dir))
    for run in RUNS:
        cwd = tmp / f"ws-pi-{run}"
        prepare_workspace(cwd)
        cli = run_json_cli(pi_json_argv(pi_bin, prompt(run)), cwd=cwd, env=env)
        check_run(cli, f"pi ({run})", _turns_of(run, turns))


def driver_argv(python: Path, spec: PeerSpec, address: str) -> list[str]:
    argv = [str(python), "-m", "bench.peers.drive", spec.app, "--address", address]
    for run in RUNS:
        argv += ["--prompt", prompt(run)]
    return argv


def run_peer(spec: PeerSpec, python: Path, tmp: Path, llm: ScriptedServerProcess, dev: DevServer) -> None:
    cwd = tmp / f"ws-{spec.name}"
    prepare_workspace(cwd)
    env = clean_env(
        OPENAI_BASE_URL=llm.url_for(spec.name, "openai-responses"),
        OPENAI_API_KEY=API_KEY,
        # The Agents SDK would send its traces to OpenAI's platform.
        OPENAI_AGENTS_DISABLE_TRACING="1",
    )
    proc = subprocess.run(
        driver_argv(python, spec, dev.address),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{spec.label} driver exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
    outputs = [json.loads(line)["output"] for line in proc.stdout.splitlines() if line.startswith("{")]
    if outputs != [FINAL_ANSWER] * len(RUNS):
        raise RuntimeError(f"{spec.label} runs ended with {outputs}, expected the scripted final answer")


def _turns_of(run: str, turns: int) -> int:
    return WARM_UP_TURNS if run == "warm-up" else turns


def prepare_peers(specs: Sequence[PeerSpec]) -> dict[str, tuple[Path, dict[str, str]]]:
    root = peers_root()
    print(f"peers' venvs: {root} (set TEMPI_BENCH_PEERS_DIR to move them)")
    ready = {}
    for spec in specs:
        python = ensure_env(spec, root)
        versions = installed_versions(python, spec.shown)
        print(f"  {spec.label}: " + ", ".join(f"{d} {v}" for d, v in versions.items()))
        ready[spec.name] = (python, versions)
    return ready


async def run(quick: bool, profile: bool = False) -> dict[str, Any]:
    turns = QUICK_TURNS if quick else TURNS
    peers = prepare_peers(PEERS)
    pi_bin = find_pi()
    contenders = [BASELINE, *(spec.name for spec in PEERS), *(["pi"] if pi_bin else [])]
    labels = {BASELINE: "tempi", **{spec.name: spec.label for spec in PEERS}, "pi": "pi 0.73.1 (no Temporal)"}
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-peers-"))
    records = tmp / "requests.jsonl"
    scenarios = {name: scenario(turns) for name in contenders}
    try:
        with (
            ScriptedServerProcess(tmp / "llm", scenarios, record=records) as llm,
            DevServer(tmp / "temporal") as dev,
        ):
            print(f"  tempi: {turns} read turns, {turns} bash turns ...", flush=True)
            run_tempi(tmp, llm, dev, turns)
            for spec in PEERS:
                print(f"  {spec.label}: {turns} read turns, {turns} bash turns ...", flush=True)
                run_peer(spec, peers[spec.name][0], tmp, llm, dev)
            if pi_bin:
                print(f"  pi: {turns} read turns, {turns} bash turns ...", flush=True)
                run_pi(pi_bin, tmp, llm, turns)
            floor = await temporal_floor.measure(dev.address, dev.pid)
        gaps = {name: per_turn(records, name, turns) for name in contenders}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    comparison = compare(gaps, floor["round_trip"])
    print_comparison(comparison, labels, turns)
    return {
        "turns_per_run": turns,
        "pi": pi_bin,
        "versions": {name: versions for name, (_, versions) in peers.items()},
        "labels": labels,
        "per_turn": comparison,
        # Turn by turn: a peer's turn grows with its conversation, which it sends through Temporal.
        "turns_ms": {
            name: {kind: [round(gap * 1000, 2) for gap in values] for kind, values in by_kind.items()}
            for name, by_kind in gaps.items()
        },
        "temporal_round_trip": floor,
    }
