"""Cold start: `tempi -p` with no server running (fresh TEMPI_HOME; the embedded service
starts, answers, and is then stopped with `tempi server stop`). Warm start: with the
service running, process start to the first token (`message_update`) in --mode json.
pi's start to first token is measured the same way when pi is installed."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.overhead import find_pi
from bench.report import median, print_table
from bench.rig import MODEL_ID, PROVIDER, ScriptedServerProcess, clean_env, tempi_command, write_models_json
from bench.sessions import pi_json_argv, run_json_cli, tempi_json_argv

ANSWER = {"text": "Hello from the scripted model. " * 4, "chunk_size": 8}


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
    repeats = 2 if quick else 5
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-startup-"))
    cwd = tmp / "ws"
    cwd.mkdir()
    cold: list[float] = []
    stops: list[float] = []
    warm: list[float] = []
    pi_first: list[float] = []
    with ScriptedServerProcess(tmp / "llm", {"hello": [ANSWER]}) as llm:
        for i in range(repeats):
            home = tmp / f"home-cold-{i}"
            write_models_json(home, llm.base_url, "hello")
            env = clean_env(home)
            seconds, done = _timed(
                tempi_command("-p", "hi", "--provider", PROVIDER, "--model", MODEL_ID), cwd, env
            )
            if done.returncode != 0 or "Hello from" not in done.stdout:
                raise RuntimeError(f"cold tempi -p failed ({done.returncode}): {done.stderr[-1500:]}")
            cold.append(seconds)
            seconds, done = _timed(tempi_command("server", "stop"), cwd, env)
            stops.append(seconds)
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
    warm, pi_first = warm[1:], pi_first[1:]  # the first run warms the file cache
    results = {
        "repeats": repeats,
        "cold_start_s": {"median": round(median(cold), 2), "all": [round(x, 2) for x in cold]},
        "server_stop_s": {"median": round(median(stops), 2), "all": [round(x, 2) for x in stops]},
        "warm_first_token_s": {"median": round(median(warm), 3), "all": [round(x, 3) for x in warm]},
        "pi_first_token_s": {"median": round(median(pi_first), 3), "all": [round(x, 3) for x in pi_first]}
        if pi_first
        else None,
    }
    print_table(
        "Start-up (seconds, median)",
        ["measure", "median", "runs"],
        [
            ["cold `tempi -p` to exit (service starts)", median(cold), len(cold)],
            ["`tempi server stop`", median(stops), len(stops)],
            ["warm `tempi --mode json -p` to first token", median(warm), len(warm)],
            ["pi --mode json -p to first token", median(pi_first) if pi_first else "n/a", len(pi_first)],
        ],
    )
    shutil.rmtree(tmp, ignore_errors=True)
    return results
