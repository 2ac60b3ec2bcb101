"""Cold start: `tempi --mode json -p` with no server running (fresh TEMPI_HOME; the
embedded service starts, answers, and is then stopped with `tempi server stop`), process
start to the first token (`message_update`) and to exit. Warm start: with the service
running, process start to the first token. First prompt: the service started a few seconds
earlier (as the interactive mode starts it while the user types) but has run no model
call yet. pi's start to first token is measured the same way when pi is installed. Medians with the range, as other jobs may share the cores."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.cold_floor_workflow import FIRST_TOKEN
from bench.overhead import find_pi
from bench.report import median, print_table
from bench.rig import (
    MODEL_ID,
    PROJECT_ROOT,
    PROVIDER,
    PYTHON,
    ScriptedServerProcess,
    bytecode_cache_in_use,
    clean_env,
    tempi_command,
    write_models_json,
)
from bench.sessions import pi_json_argv, run_json_cli, tempi_json_argv

ANSWER = {"text": "Hello from the scripted model. " * 4, "chunk_size": 8}
TYPING_S = 5.0  # how long the service runs before the first prompt arrives


def _timed(
    argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float = 180
) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
    )
    return time.perf_counter() - start, done


async def run(quick: bool, profile: bool = False) -> dict[str, Any]:
    del profile
    repeats = 3 if quick else 5
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-startup-"))
    cwd = tmp / "ws"
    cwd.mkdir()
    cold: list[float] = []
    cold_first: list[float] = []
    stops: list[float] = []
    warm: list[float] = []
    first_prompt: list[float] = []
    pi_first: list[float] = []
    floor_first: list[float] = []
    with ScriptedServerProcess(tmp / "llm", {"hello": [ANSWER]}) as llm:
        for i in range(repeats):
            home = tmp / f"home-cold-{i}"
            write_models_json(home, llm.base_url, "hello")
            env = clean_env(home)
            r = run_json_cli(tempi_json_argv("hi"), cwd=cwd, env=env, timeout_s=180)
            if r.exit_code != 0 or r.first_token_s is None:
                raise RuntimeError(f"cold tempi -p failed ({r.exit_code}): {r.stderr[-1500:]}")
            cold_first.append(r.first_token_s)
            cold.append(r.wall_s)
            seconds, _ = _timed(tempi_command("server", "stop"), cwd, env)
            stops.append(seconds)
        for i in range(repeats):
            home = tmp / f"home-fresh-{i}"
            write_models_json(home, llm.base_url, "hello")
            env = clean_env(home)
            started = subprocess.run(
                [PYTHON, "-c", _START_SERVICE],
                cwd=cwd, env=env, capture_output=True, text=True, timeout=180,
            )  # fmt: skip
            if started.returncode != 0:
                raise RuntimeError(f"the service did not start: {started.stderr[-1500:]}")
            time.sleep(TYPING_S)
            r = run_json_cli(tempi_json_argv("hi"), cwd=cwd, env=env, timeout_s=120)
            _timed(tempi_command("server", "stop"), cwd, env)
            if r.first_token_s is None:
                raise RuntimeError(f"first prompt streamed no token: {r.stderr[-1500:]}")
            first_prompt.append(r.first_token_s)
        home = tmp / "home-warm"
        write_models_json(home, llm.base_url, "hello")
        env = clean_env(home)
        _timed(
            tempi_command("-p", "hi", "--provider", PROVIDER, "--model", MODEL_ID), cwd, env
        )  # starts the service
        try:
            for _ in range(repeats + 1):
                r = run_json_cli(tempi_json_argv("hi"), cwd=cwd, env=env, timeout_s=120)
                if r.first_token_s is None:
                    raise RuntimeError(f"warm tempi run streamed no token: {r.stderr[-1500:]}")
                warm.append(r.first_token_s)
        finally:
            _timed(tempi_command("server", "stop"), cwd, env)
        pi_bin = find_pi()
        if pi_bin:
            agent = tmp / "pi-agent"
            write_models_json(agent, llm.base_url, "hello")
            for _ in range(repeats + 1):
                r = run_json_cli(
                    pi_json_argv(pi_bin, "hi"), cwd=cwd, env=clean_env(PI_CODING_AGENT_DIR=str(agent))
                )
                if r.first_token_s is not None:
                    pi_first.append(r.first_token_s)
        for i in range(repeats):
            floor_first.append(_cold_floor(tmp / f"floor-{i}", llm.url_for("hello"), cwd))
    warm, pi_first = warm[1:], pi_first[1:]  # the first run warms the file cache
    results = {
        "repeats": repeats,
        "bytecode_cache": bytecode_cache_in_use(),
        "cold_first_token_s": _summary(cold_first),
        "cold_start_s": _summary(cold),
        "server_stop_s": _summary(stops),
        "warm_first_token_s": _summary(warm),
        "first_prompt_first_token_s": _summary(first_prompt),
        "pi_first_token_s": _summary(pi_first) if pi_first else None,
        "temporal_floor_first_token_s": _summary(floor_first),
    }
    print_table(
        "Start-up (seconds)",
        ["measure", "median", "min", "max", "runs"],
        [
            _row("cold `tempi --mode json -p` to first token (service starts)", cold_first),
            _row("cold `tempi --mode json -p` to exit", cold),
            _row("`tempi server stop`", stops),
            _row("warm `tempi --mode json -p` to first token", warm),
            _row(f"first prompt, service up {TYPING_S:.0f} s, to first token", first_prompt),
            _row("pi --mode json -p to first token", pi_first),
            _row("floor: one Python process on Temporal (bench.cold_floor)", floor_first),
        ],
    )
    shutil.rmtree(tmp, ignore_errors=True)
    return results


def _cold_floor(directory: Path, base_url: str, cwd: Path) -> float:
    """Spawn to first token of bench.cold_floor (a fresh dev server database each time)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [PYTHON, "-m", "bench.cold_floor", str(directory), base_url],
        cwd=PROJECT_ROOT, env=clean_env(directory / "home"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    first: float | None = None
    for line in proc.stdout:
        if line.strip() == FIRST_TOKEN and first is None:
            first = time.perf_counter() - start
    _, err = proc.communicate(timeout=60)
    if proc.returncode != 0 or first is None:
        raise RuntimeError(f"bench.cold_floor failed ({proc.returncode}): {err[-1500:]}")
    return first


_START_SERVICE = "from tempi.config.paths import tempi_home; from tempi.workers.service import ensure_service; ensure_service(tempi_home(), quiet=True)"


def _summary(values: list[float]) -> dict[str, Any]:
    return {
        "median": round(median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "all": [round(x, 3) for x in values],
    }


def _row(label: str, values: list[float]) -> list[Any]:
    if not values:
        return [label, "n/a", "n/a", "n/a", 0]
    return [label, median(values), min(values), max(values), len(values)]
