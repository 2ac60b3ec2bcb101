"""The interactive mode gives queued messages back as pi does: Alt+Up puts them in the
editor and the run goes on; Esc aborts and puts them in the editor, before what was being
typed; neither lets them fire later. Driven through a real terminal (tmux)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import tempi_env
from tests.test_interactive_terminal import Terminal, _setup, terminals  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


def _open(terminals: list[Terminal], work: Path, home: Path, temporal_address: str) -> Terminal:  # noqa: F811
    t = Terminal(["--model", "mock/mock-model"], cwd=work, env=tempi_env(home, temporal_address))
    terminals.append(t)
    t.wait_for("mock/mock-model", timeout=90)  # the footer: ready for input (a busy machine starts slowly)
    return t


def _rules(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line and set(line) == {"─"}]


def _editor_lines(screen: str) -> list[str]:
    """The editor's lines: between the last two rules, without the prompt marks."""
    lines = screen.rstrip("\n").splitlines()
    rules = _rules(lines)
    assert len(rules) >= 2, screen
    return [line[2:].rstrip() for line in lines[rules[-2] + 1 : rules[-1]]]


def _transcript(screen: str) -> str:
    """What is above the editor: the conversation, the live area and the queue."""
    lines = screen.rstrip("\n").splitlines()
    return "\n".join(lines[: _rules(lines)[-2]])


def _drawn(t: Terminal, text: str, timeout: float = 30) -> str:
    """The screen once it shows `text` with the editor drawn below it: a line printed above
    the editor erases it for a moment, and a screen caught then has no editor to read."""
    deadline = time.monotonic() + timeout
    while True:
        screen = t.screen()
        if text in screen and len(_rules(screen.rstrip("\n").splitlines())) >= 2:
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} with the editor below it did not appear. Screen:\n{screen}")
        time.sleep(0.1)


def _wait_for_editor(t: Terminal, expected: list[str], timeout: float = 20) -> str:
    """Wait until the editor holds `expected` and nothing is shown as queued."""
    deadline = time.monotonic() + timeout
    while True:
        screen = t.screen()
        drawn = len(_rules(screen.rstrip("\n").splitlines())) >= 2
        if drawn and _editor_lines(screen) == expected and "(queued)" not in _transcript(screen):
            return screen
        if time.monotonic() > deadline:
            held = _editor_lines(screen) if drawn else "no editor"
            raise AssertionError(f"the editor holds {held}, not {expected}. Screen:\n{screen}")
        time.sleep(0.1)


def test_alt_up_and_esc_bring_the_queued_messages_back_to_the_editor(
    tmp_path: Path,
    temporal_address: str,
    scripted_server: ScriptedLLMServer,
    terminals: list[Terminal],  # noqa: F811
) -> None:
    home, work = _setup(
        tmp_path,
        scripted_server,
        "interactive-dequeue",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 4; echo slept-well"}}]},
                {"text": "The command finished."},
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]},
                {"text": "Answer to new."},
                {"text": "Answer to a stale queued message."},
            ],
        },
    )  # fmt: skip
    t = _open(terminals, work, home, temporal_address)
    t.type("start the job")
    t.keys("Enter")
    t.wait_for("$ sleep 4; echo slept-well")
    t.type("steer me")
    t.keys("Enter")
    t.type("later please")
    t.keys("M-Enter")
    t.wait_for("follow-up (queued): later please")

    # Alt+Up: both come back, steering first, and the run goes on.
    t.keys("M-Up")
    t.wait_for("Restored 2 queued messages to editor")
    _wait_for_editor(t, ["steer me", "", "later please"])
    shown = _transcript(_drawn(t, "The command finished."))
    assert "Aborted." not in shown
    assert "❯ steer me" not in shown and "❯ later please" not in shown

    # Esc: aborts, and the queued follow-up comes back before the text being typed.
    t.keys("C-c")  # clears the editor
    _wait_for_editor(t, [""])
    t.type("go long")
    t.keys("Enter")
    t.wait_for("$ sleep 30")
    t.type("stale follow-up")
    t.keys("M-Enter")
    t.wait_for("follow-up (queued): stale follow-up")
    t.type("half typed")
    t.keys("Escape")
    t.wait_for("Aborted.", after="❯ go long")
    _wait_for_editor(t, ["stale follow-up", "", "half typed"])

    time.sleep(CTRL_C_GAP_S)
    t.keys("C-c")
    _wait_for_editor(t, [""])
    t.type("new")
    t.keys("Enter")
    t.wait_for("Answer to new.", after="❯ new")
    time.sleep(2)
    shown = _transcript(_drawn(t, "Answer to new."))
    assert "Answer to a stale queued message." not in shown
    assert "❯ stale follow-up" not in shown
    assert len(scripted_server.requests_for("interactive-dequeue")) == 4


# Two Ctrl+C presses this close together would quit.
CTRL_C_GAP_S = 2.2
