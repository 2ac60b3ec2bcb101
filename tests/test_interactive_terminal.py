"""`tempi` with no -p, in a real terminal (tmux), against the scripted LLM and the dev server.

Each test drives the real CLI with keystrokes and asserts on the captured screen text.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json

# A slow end-to-end group (see tests/conftest.py) that drives a real terminal.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]

WAIT_S = 30.0


class Terminal:
    """A tmux pane running one command, on a tmux server of its own."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        self.socket = f"tempi-test-{uuid.uuid4().hex[:8]}"
        command = shlex.join(
            ["env", "-i", *(f"{k}={v}" for k, v in env.items()), "TERM=tmux-256color",
             sys.executable, "-m", "tempi", *args]
        )  # fmt: skip
        # The pane stays after the command ends, so its last words can be read.
        self._tmux("new-session", "-d", "-x", "110", "-y", "40", "-c", str(cwd),
                   f"{command}; echo '[tempi exited '$?']'; sleep 600")  # fmt: skip

    def _tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True, timeout=10
        ).stdout

    def screen(self) -> str:
        """Everything the pane shows, scrollback included, with wrapped lines joined."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-2000")

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-l", text)

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    def wait_for(self, text: str, *, after: str | None = None, timeout: float = WAIT_S) -> str:
        """Wait until `text` is on the screen (below the last `after`, if given)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            tail = screen[screen.rfind(after) :] if after and after in screen else screen
            if text in tail and (after is None or after in screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} did not appear within {timeout}s. Screen:\n{screen}")
            time.sleep(0.1)

    def close(self) -> None:
        socket_path = self._tmux("display-message", "-p", "#{socket_path}").strip()
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10)
        Path(socket_path).unlink(missing_ok=True)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for t in opened:
        t.close()


def _setup(tmp_path: Path, server: ScriptedLLMServer, scenario: str, script: Any) -> tuple[Path, Path]:
    server.add_scenario(scenario, script)
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir(parents=True)
    write_models_json(home, server, scenario)
    # A second model, for /model.
    models = json.loads((home / "models.json").read_text())
    other = dict(models["providers"]["mock"]["models"][0], id="mock-other", name="mock-other")
    models["providers"]["mock"]["models"].append(other)
    (home / "models.json").write_text(json.dumps(models))
    return home, work


def _open(terminals: list[Terminal], work: Path, home: Path, temporal_address: str, *args: str) -> Terminal:
    t = Terminal(["--model", "mock/mock-model", *args], cwd=work, env=tempi_env(home, temporal_address))
    terminals.append(t)
    t.wait_for("mock/mock-model")  # the footer: ready for input
    return t


def test_prompt_model_compact_fork_quit_and_continue(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(
        tmp_path,
        scripted_server,
        "interactive-main",
        {
            "turns": [
                {"text": "Let me look.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo tool-said-hi"}}]},
                {"text": "# Findings\n\nThe tool said **hi** to us.", "chunk_size": 3, "chunk_delay_ms": 15},
                {"text": "Second answer, after meanwhile."},
            ],
            "summary": "## Goal\nScripted summary for the test.",
        },
    )  # fmt: skip
    t = _open(terminals, work, home, temporal_address)
    t.type("what does the tool say?")
    t.keys("Enter")
    screen = t.wait_for("The tool said hi to us.")
    assert "❯ what does the tool say?" in screen
    assert "Let me look." in screen
    assert "✓ $ echo tool-said-hi" in screen
    assert "tool-said-hi" in screen.split("✓ $ echo tool-said-hi", 1)[1]
    assert "Findings" in screen
    # The footer counts the context of the last answer against the window.
    t.wait_for("0.1%/128k (auto)")

    t.type("/model")
    t.keys("Enter")
    t.wait_for("Choose a model")
    t.type("other")
    t.keys("Enter")
    screen = t.wait_for("Model: mock/mock-other")
    t.wait_for("mock/mock-other • thinking off")

    t.type("/compact keep the findings")
    t.keys("Enter")
    t.wait_for("Compacted the conversation")
    requests = scripted_server.requests_for("interactive-main")
    summary_request = json.dumps(requests[-1].body)
    assert "keep the findings" in summary_request

    t.type("/fork")
    t.keys("Enter")
    t.wait_for("Fork from a message")
    t.keys("Enter")
    t.wait_for("Forked:")
    # The forked message waits in the editor; Ctrl+C clears it, a second one quits.
    t.keys("C-c")
    t.wait_for("Press Ctrl+C again")
    t.keys("C-c")
    screen = t.wait_for("[tempi exited 0]")
    assert "is kept" in screen and "tempi --continue" in screen

    # Meanwhile, another terminal continues the same (forked) session.
    env = tempi_env(home, temporal_address)
    done = run_tempi(["--continue", "-p", "a question asked meanwhile"], cwd=work, env=env, timeout=60)
    assert done.returncode == 0, done.stderr

    t2 = _open_continue(terminals, work, home, temporal_address)
    screen = t2.wait_for("a question asked meanwhile")
    assert "earlier messages" in screen
    t2.type("/quit")
    t2.keys("Enter")
    t2.wait_for("[tempi exited 0]")


def _open_continue(terminals: list[Terminal], work: Path, home: Path, temporal_address: str) -> Terminal:
    t = Terminal(["--continue"], cwd=work, env=tempi_env(home, temporal_address))
    terminals.append(t)
    t.wait_for("thinking off")
    return t


def test_steering_follow_up_and_abort_while_a_slow_tool_runs(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(
        tmp_path,
        scripted_server,
        "interactive-steer",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 2; echo slept-well"}}]},
                {"text": "Steering received."},
                {"text": "Follow-up handled."},
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 60"}}]},
            ],
        },
    )  # fmt: skip
    t = _open(terminals, work, home, temporal_address)
    t.type("start the slow job")
    t.keys("Enter")
    t.wait_for("$ sleep 2; echo slept-well")
    t.type("use the fast path instead")
    t.keys("Enter")
    t.type("then write a summary")
    t.keys("M-Enter")
    screen = t.wait_for("follow-up (queued): then write a summary")
    assert "steering (queued): use the fast path instead" in screen
    screen = t.wait_for("Follow-up handled.")
    # Delivered in order: the tool's result, the steering message, its answer, the follow-up.
    order = [
        screen.index("✓ $ sleep 2; echo slept-well"),
        screen.index("❯ use the fast path instead"),
        screen.index("Steering received."),
        screen.index("❯ then write a summary"),
        screen.index("Follow-up handled."),
    ]
    assert order == sorted(order)
    requests = scripted_server.requests_for("interactive-steer")
    assert "use the fast path instead" in json.dumps(requests[1].body["messages"][-1])

    t.type("now something long")
    t.keys("Enter")
    t.wait_for("$ sleep 60")
    t.keys("Escape")
    screen = t.wait_for("Aborted.", after="❯ now something long")
    assert "queued" not in screen.split("❯ now something long", 1)[1]
    t.type("/quit")
    t.keys("Enter")
    t.wait_for("[tempi exited 0]")


def test_bash_command_and_hotkeys(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(tmp_path, scripted_server, "interactive-bash", [{"text": "I saw it."}])
    t = _open(terminals, work, home, temporal_address)
    t.type("!echo from-the-user")
    t.keys("Enter")
    t.wait_for("✓ $ echo from-the-user")
    t.type("what did I run?")
    t.keys("Enter")
    t.wait_for("I saw it.")
    # The command's output went into the model's context.
    body = json.dumps(scripted_server.requests_for("interactive-bash")[-1].body)
    assert "from-the-user" in body
    t.type("/hotkeys")
    t.keys("Enter")
    screen = t.wait_for("Emacs-style editing")
    assert "/compact" in screen.split("Emacs-style editing", 1)[1]
    # Completion: @ completes files of the working directory. The menu opens as one types
    # (its candidates are found in the background); Tab then takes the first.
    (work / "notes-for-tempi.md").write_text("x")
    t.type("look at @notes-for")
    t.wait_for(" notes-for-tempi.md", after="❯ look at @notes-for")
    t.keys("Tab")
    t.wait_for("❯ look at @notes-for-tempi.md")
    t.keys("C-c")
    t.keys("C-d")
    t.wait_for("[tempi exited 0]")
    assert os.path.isdir(home / "sessions")
