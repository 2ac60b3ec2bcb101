"""Esc in the interactive mode while the model's bash command runs, timed as a person sees
it: the key sent to a real terminal (tmux), then polled until the command's process is
gone (the kill) and until the transcript says the run was aborted. tempi runs on its
background service (a fresh TEMPI_HOME); pi, when installed, is timed the same way on the
same scripted model. Medians with the range."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.overhead import find_pi
from bench.report import median, print_table
from bench.rig import MODEL_ID, PROVIDER, ScriptedServerProcess, clean_env, tempi_command, write_models_json

SCENARIO = "abort"
# Each trial's command is a sleep with its own length, so its process is found by name.
SLEEP_BASE_S = 40
# What each program's transcript says once a run is aborted.
ABORTED_TEXT = {"tempi": "Aborted.", "pi": "Operation aborted"}
READY_TEXT = {"tempi": f"{PROVIDER}/{MODEL_ID}", "pi": MODEL_ID}
POLL_S = 0.005
WAIT_S = 60.0


class Pane:
    """One tmux pane on a tmux server of its own."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.socket = f"tempi-bench-{uuid.uuid4().hex[:8]}"
        line = shlex.join(
            ["env", "-i", *(f"{k}={v}" for k, v in env.items()), "TERM=tmux-256color", *command]
        )
        self._tmux("new-session", "-d", "-x", "120", "-y", "40", "-c", str(cwd), f"{line}; sleep 600")

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10)
        return done.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-S", "-3000")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-l", text)

    def wait_for(self, text: str, count: int = 1) -> None:
        deadline = time.monotonic() + WAIT_S
        while self.screen().count(text) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{text!r} did not appear. Screen:\n{self.screen()[-3000:]}")
            time.sleep(0.05)

    def close(self) -> None:
        self._tmux("kill-server")


def _process_alive(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-f", "-x", pattern], capture_output=True).returncode == 0


def _trial(pane: Pane, program: str, index: int) -> tuple[float, float]:
    """Seconds from Esc to the command's death and to the transcript's "aborted"."""
    pattern = f"sleep {SLEEP_BASE_S + index}"
    shown_before = pane.screen().count(ABORTED_TEXT[program])
    pane.type(f"run trial {index}")
    pane.keys("Enter")
    deadline = time.monotonic() + WAIT_S
    while not _process_alive(pattern):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{program}: the command never started. Screen:\n{pane.screen()[-3000:]}")
        time.sleep(0.02)
    time.sleep(0.5)  # the tool is running steadily, as when a person decides to stop it
    pressed = time.monotonic()
    pane.keys("Escape")
    killed = shown = None
    while killed is None or shown is None:
        now = time.monotonic()
        if now - pressed > WAIT_S:
            raise RuntimeError(f"{program}: no abort after {WAIT_S} s. Screen:\n{pane.screen()[-3000:]}")
        if killed is None and not _process_alive(pattern):
            killed = now - pressed
        if shown is None and pane.screen().count(ABORTED_TEXT[program]) > shown_before:
            shown = now - pressed
        time.sleep(POLL_S)
    time.sleep(1.0)  # before the next prompt: a key right after Esc would read as Alt+key
    return killed, shown


def _measure(
    program: str, command: list[str], cwd: Path, env: dict[str, str], trials: int
) -> dict[str, list[float]]:
    pane = Pane(command, cwd, env)
    try:
        pane.wait_for(READY_TEXT[program])
        kills: list[float] = []
        shows: list[float] = []
        for index in range(trials + 1):
            killed, shown = _trial(pane, program, index)
            if index:  # the first trial warms the worker and the file cache
                kills.append(killed)
                shows.append(shown)
        return {"kill_s": kills, "shown_s": shows}
    finally:
        pane.close()


async def run(quick: bool, profile: bool = False) -> dict[str, Any]:
    del profile
    if shutil.which("tmux") is None:
        raise RuntimeError("the abort benchmark drives a real terminal: install tmux")
    trials = 4 if quick else 10
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-abort-"))
    cwd = tmp / "ws"
    cwd.mkdir()
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": f"sleep {SLEEP_BASE_S + i}"}}]}
        for i in range(trials + 1)
    ]
    results: dict[str, Any] = {"trials": trials}
    rows = []
    with ScriptedServerProcess(tmp / "llm", {SCENARIO: {"select": "sequential", "turns": turns}}) as llm:
        home = tmp / "tempi-home"
        write_models_json(home, llm.base_url, SCENARIO)
        env = clean_env(home)
        try:
            tempi = _measure("tempi", tempi_command("--model", f"{PROVIDER}/{MODEL_ID}"), cwd, env, trials)
        finally:
            subprocess.run(tempi_command("server", "stop", "--force"), cwd=cwd, env=env, capture_output=True)
        results["tempi"] = tempi
        rows += [_row("tempi: Esc to the command killed", tempi["kill_s"]),
                 _row("tempi: Esc to \"Aborted.\" shown", tempi["shown_s"])]  # fmt: skip
    pi_bin = find_pi()
    if pi_bin:
        with ScriptedServerProcess(
            tmp / "llm-pi", {SCENARIO: {"select": "sequential", "turns": turns}}
        ) as llm:
            agent = tmp / "pi-agent"
            write_models_json(agent, llm.base_url, SCENARIO)
            pi_env = clean_env(PI_CODING_AGENT_DIR=str(agent), HOME=str(tmp / "pi-home"))
            pi = _measure("pi", [pi_bin, "--provider", PROVIDER, "--model", MODEL_ID], cwd, pi_env, trials)
        results["pi"] = pi
        rows += [_row("pi: Esc to the command killed", pi["kill_s"]),
                 _row("pi: Esc to \"Operation aborted\" shown", pi["shown_s"])]  # fmt: skip
    print_table("Abort in the interactive mode (seconds)", ["measure", "median", "min", "max", "runs"], rows)
    shutil.rmtree(tmp, ignore_errors=True)
    return results


def _row(name: str, values: list[float]) -> list[str]:
    if not values:
        return [name, "-", "-", "-", "0"]
    return [name, f"{median(values):.3f}", f"{min(values):.3f}", f"{max(values):.3f}", str(len(values))]
