"""Watch and redirect a running session from other processes: `tempi attach` shows its
live events from the start, `tempi steer` reaches it, and the original client sees both."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json


class LineReader:
    """Collects a process's stdout lines on a thread so waits can be bounded."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[dict] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(json.loads(line))

    def wait_for(self, predicate, timeout: float = 30) -> dict:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for event in self.lines[seen:]:
                if predicate(event):
                    return event
            seen = len(self.lines)
            time.sleep(0.05)
        raise AssertionError(f"no matching line; got {[e.get('type') for e in self.lines][-10:]}")


UNTIL_PROCEED = "for i in $(seq 600); do [ -f proceed ] && break; sleep 0.1; done; echo slow-done"


def test_attach_from_another_process_and_steer_from_a_third(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "attach-steer",
        [
            {
                "text": "Starting the slow step.",
                # Runs until the test has steered and followed up (a timed sleep ran out
                # first once, on a loaded machine, and the follow-up found the run over).
                "tool_calls": [{"name": "bash", "arguments": {"command": UNTIL_PROCEED}}],
            },
            {"text": "Steered: doing it your way."},
            {"text": "Followed up."},
        ],
    )
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "attach-steer")
    env = tempi_env(home, temporal_address)
    # The production layout: a worker of its own, and clients that only talk to Temporal
    # (queries need a worker, so none of the clients may take the only one away).
    worker = subprocess.Popen(
        [sys.executable, "-m", "tempi", "worker"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tempi",
            "--model",
            "mock/mock-model",
            "--mode",
            "json",
            "--no-worker",
            "-p",
            "do the slow thing",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    attach = None
    try:
        assert runner.stdout is not None
        main = LineReader(runner.stdout)
        session_id = main.wait_for(lambda e: e["type"] == "session")["id"]
        main.wait_for(lambda e: e["type"] == "tool_execution_start")

        attach = subprocess.Popen(
            [sys.executable, "-m", "tempi", "attach", session_id[:8], "--mode", "json", "--no-worker"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert attach.stdout is not None
        watcher = LineReader(attach.stdout)
        # From the start: the prompt that was sent before attaching.
        watcher.wait_for(lambda e: e["type"] == "message_end" and e["message"]["role"] == "user")

        steer = run_tempi(
            ["steer", session_id, "Do it my way instead.", "--no-worker"], cwd=tmp_path, env=env
        )
        assert steer.returncode == 0, steer.stderr
        # Each says what it did with the message, as `abort` and an idle session's steer do.
        assert f"steering message queued for session {session_id[:8]}" in steer.stderr
        follow = run_tempi(
            ["follow-up", session_id[:8], "Then tidy up.", "--no-worker"], cwd=tmp_path, env=env
        )
        assert follow.returncode == 0, follow.stderr
        assert f"follow-up queued for session {session_id[:8]}" in follow.stderr
        (tmp_path / "proceed").touch()
        missing = run_tempi(["steer", "nosuch", "hello", "--no-worker"], cwd=tmp_path, env=env)
        assert missing.returncode != 0
        assert missing.stderr.count("No session matches") == 1, missing.stderr

        final = main.wait_for(
            lambda e: e["type"] == "message_end" and "Steered" in json.dumps(e["message"]), timeout=40
        )
        assert final["message"]["stopReason"] == "stop"
        main.wait_for(lambda e: e["type"] == "message_end" and "Followed up." in json.dumps(e["message"]))
        assert runner.wait(30) == 0
        # The watcher saw the steering message and the answer, live.
        watcher.wait_for(
            lambda e: e["type"] == "message_end" and "Do it my way instead." in json.dumps(e["message"])
        )
        watcher.wait_for(lambda e: e["type"] == "message_end" and "Steered" in json.dumps(e["message"]))
        assert any(e["type"] == "message_update" for e in watcher.lines)
    finally:
        for proc in (runner, attach, worker):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.slow
def test_attach_shows_tool_results_says_idle_detaches_on_ctrl_c_and_steer_says_it_started_a_run(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "attach-readable",
        {
            "select": "sequential",
            "turns": [
                {
                    "text": "Looking.",
                    "tool_calls": [{"name": "bash", "arguments": {"command": "echo attach-sees-this"}}],
                },
                {"text": "All **done** here."},
                {"text": "Steered while idle."},
            ],
        },
    )
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "attach-readable")
    env = tempi_env(home, temporal_address)
    worker = subprocess.Popen(
        [sys.executable, "-m", "tempi", "worker"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    attach = None
    try:
        done = run_tempi(
            ["--model", "mock/mock-model", "--mode", "json", "--no-worker", "-p", "look around"],
            cwd=tmp_path,
            env=env,
        )
        assert done.returncode == 0, done.stderr + done.stdout[-3000:]
        session_id = json.loads(done.stdout.splitlines()[0])["id"]

        attach = subprocess.Popen(
            [sys.executable, "-m", "tempi", "attach", session_id[:8], "--no-worker"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert attach.stdout is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(attach.stdout), daemon=True)  # type: ignore[union-attr, arg-type]
        reader.start()

        def shown() -> str:
            return "".join(lines)

        deadline = time.monotonic() + 60
        while "is idle" not in shown() and time.monotonic() < deadline:
            time.sleep(0.1)
        text = shown()
        # As the interactive view: the prompt, the tool call with its result, the answer as
        # markdown (no raw JSON of arguments), and a word that nothing is happening.
        assert "❯ look around" in text
        assert "✓ $ echo attach-sees-this" in text
        assert "attach-sees-this" in text.split("✓ $ echo attach-sees-this", 1)[1]
        assert "All done here." in text
        assert '{"command"' not in text
        assert f"session {session_id[:8]} is idle" in text

        steer = run_tempi(["steer", session_id[:8], "and now this", "--no-worker"], cwd=tmp_path, env=env)
        assert steer.returncode == 0, steer.stderr
        assert "was idle, so the message started a run" in steer.stderr
        deadline = time.monotonic() + 60
        while "Steered while idle." not in shown() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "❯ and now this" in shown() and "Steered while idle." in shown()

        attach.send_signal(signal.SIGINT)
        assert attach.wait(30) == 0
        reader.join(10)
        assert attach.stderr is not None
        errors = attach.stderr.read()
        assert "Traceback" not in errors and errors.strip() == "", errors
        assert "Detached" in shown()
    finally:
        for proc in (attach, worker):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
