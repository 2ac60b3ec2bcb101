"""The rig of the `tempi web` tests: a worker, real sessions run against the scripted model,
and `tempi web` processes, all on the test session's Temporal dev server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import tempi_env, write_models_json
from tests.processes import stop_process

SECRET = "sk-mock-secret-key-12345"  # the API key tempi_env gives the mock provider


@dataclass
class Console:
    proc: subprocess.Popen[str]
    base: str
    token: str

    @property
    def origin(self) -> str:
        return self.base

    def stop(self) -> None:
        stop_process(self.proc)


@dataclass
class Rig:
    home: Path
    project: Path
    env: dict[str, str]
    worker: subprocess.Popen[bytes]
    consoles: list[Console] = field(default_factory=list)

    def start_console(self, *flags: str) -> Console:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tempi", "web", "--port", "0", *flags],
            cwd=self.project,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        console = Console(proc, *console_url(proc))
        self.consoles.append(console)
        return console

    def run_session(self, prompt: str, *, name: str | None = None) -> str:
        """A kept session that answered `prompt` (named `name`, as /name names it); returns
        its id (its workflow stays open)."""
        return kept_session(prompt, cwd=self.project, env=self.env, flags=("--no-worker",), name=name)

    def session_file(self, session_id: str) -> Path:
        found = list((self.home / "sessions").glob(f"*/*_{session_id}.jsonl"))
        assert len(found) == 1, found
        return found[0]

    def entries(self, session_id: str) -> list[dict[str, Any]]:
        lines = self.session_file(session_id).read_text().splitlines()[1:]
        return [json.loads(line) for line in lines if line.strip()]

    def messages(self, session_id: str) -> list[dict[str, Any]]:
        return [e["message"] for e in self.entries(session_id) if e.get("type") == "message"]

    def close(self) -> None:
        for console in self.consoles:
            console.stop()
        stop_process(self.worker, 15)


def kept_session(
    prompt: str, *, cwd: Path, env: dict[str, str], flags: tuple[str, ...] = (), name: str | None = None
) -> str:
    """A session that answered `prompt` and goes on running; returns its id. Through RPC
    mode, whose sessions keep the default idle time when the client goes (a `-p` run's
    session closes after ten idle minutes)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tempi", "--model", "mock/mock-model", "--mode", "rpc", *flags],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    session_id: str | None = None
    try:
        proc.stdin.write(json.dumps({"type": "prompt", "message": prompt}) + "\n")
        proc.stdin.write(json.dumps({"id": "state", "type": "get_state"}) + "\n")
        proc.stdin.flush()
        ended, named = False, name is None
        for line in proc.stdout:
            said = json.loads(line)
            if said.get("type") == "agent_end" and not named:
                # Named once the answer is in, as a user's /name after reading it.
                proc.stdin.write(json.dumps({"id": "name", "type": "set_session_name", "name": name}) + "\n")
                proc.stdin.flush()
            ended = ended or said.get("type") == "agent_end"
            if said.get("id") == "name":
                assert said["success"], said
                named = True
            if said.get("id") == "state":
                assert said["success"], said
                session_id = str(said["data"]["sessionId"])
            if ended and named and session_id:
                break
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert session_id, proc.stderr.read() if proc.stderr else ""
    return session_id


def console_url(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The base URL and token a starting `tempi web` printed."""
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the URL, or EOF when it failed
    found = re.search(r"(http://[^/\s]+)/\?token=(\S+)", line)
    if found is None:
        proc.kill()
        raise AssertionError(
            f"tempi web printed {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}"
        )
    return found.group(1), found.group(2)


def start_rig(home: Path, project: Path, temporal_address: str) -> Rig:
    """A worker serving `home`'s models, for sessions run in `project`."""
    env = tempi_env(home, temporal_address)
    worker = subprocess.Popen(
        [sys.executable, "-m", "tempi", "worker"],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return Rig(home, project, env, worker)


@contextmanager
def scripted_rig(
    tmp_path_factory: pytest.TempPathFactory,
    temporal_address: str,
    server: ScriptedLLMServer,
    name: str,
    scenario: dict[str, Any],
) -> Iterator[Rig]:
    """A rig whose sessions the scripted model answers from `scenario` (added as `name`)."""
    server.add_scenario(name, scenario)
    home = tmp_path_factory.mktemp(f"{name}-home")
    write_models_json(home, server, name)
    rig = start_rig(home, tmp_path_factory.mktemp(f"{name}-project"), temporal_address)
    try:
        yield rig
    finally:
        rig.close()


def wait_until(check: Callable[[], Any], timeout: float = 30, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
