"""The spec's shell commands (setup, verify, final verify): run in a checkout with the
tools' scrubbed environment and a time limit, keeping the end of their output for the
repair prompt and the reports."""

from __future__ import annotations

import os
import signal
import subprocess

from tempi.activities.tools.tool_env import tool_environment
from tempi.pipeline.run_types import CommandOutcome

TAIL_LINES = 60
TAIL_CHARS = 6000


def tail_of(output: str) -> str:
    lines = output.rstrip().splitlines()[-TAIL_LINES:]
    return "\n".join(lines)[-TAIL_CHARS:]


def run_command(command: str, cwd: str, timeout_s: int) -> CommandOutcome:
    # API keys stay on the worker: the command gets what a tool's command gets.
    proc = subprocess.Popen(
        command,
        shell=True,
        cwd=cwd,
        env=tool_environment(os.environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        text = tail_of(out.decode(errors="replace"))
        return CommandOutcome(
            command=command,
            exit_code=None,
            tail=f"{text}\n(stopped: still running after {timeout_s}s)".lstrip(),
            passed=False,
        )
    return CommandOutcome(
        command=command,
        exit_code=proc.returncode,
        tail=tail_of(out.decode(errors="replace")),
        passed=proc.returncode == 0,
    )
