"""Details a pi user notices in the interactive mode, in a real terminal (tmux): the startup
header lists what was loaded, the footer shows the git branch and 0.0% of an empty context,
a refused `/word` stays in the editor, and Esc leaves no stale "Aborting…" under "Aborted."."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import tempi_env
from tests.test_interactive_terminal import Terminal, _setup, terminals

# A slow end-to-end group that drives a real terminal, as tests/test_interactive_terminal.py.
pytestmark = [pytest.mark.slow]
__all__ = ["terminals"]  # the fixture, imported for these tests

START_S = 90.0
EXTENSION = "def extension(tempi):\n    pass\n"


def _open(terminals: list[Terminal], work: Path, home: Path, temporal_address: str) -> Terminal:
    t = Terminal(["--model", "mock/mock-model"], cwd=work, env=tempi_env(home, temporal_address))
    terminals.append(t)
    t.wait_for("mock/mock-model", timeout=START_S)  # the footer: ready for input
    return t


def _run(t: Terminal, line: str) -> None:
    t.type(line)
    t.keys("Enter")


def _section(screen: str, name: str) -> str:
    """The line under a `[Name]` header."""
    lines = screen.splitlines()
    return lines[lines.index(f"[{name}]") + 1].rstrip()


def test_the_header_lists_what_was_loaded_and_the_footer_the_branch(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(tmp_path, scripted_server, "polish-header", [{"text": "unused"}])
    (home / "AGENTS.md").write_text("Global rules.\n")
    (work / "AGENTS.md").write_text("Project rules.\n")
    (home / "prompts").mkdir()
    (home / "prompts" / "review.md").write_text("---\ndescription: Review\n---\nReview $1.\n")
    (home / "prompts" / "explain.md").write_text("Explain $1.\n")
    skill = home / "skills" / "greet" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: greet\ndescription: Greet people\n---\nSay hello.\n")
    (home / "extensions").mkdir()
    (home / "extensions" / "noop.py").write_text(EXTENSION)
    subprocess.run(["git", "init", "-q", "-b", "trunk"], cwd=work, check=True)

    t = _open(terminals, work, home, temporal_address)
    screen = t.wait_for("[Extensions]")
    context = _section(screen, "Context")
    assert context.endswith("home/AGENTS.md, AGENTS.md"), context  # the system prompt's order
    assert _section(screen, "Skills") == "  greet"
    assert _section(screen, "Prompts") == "  /explain, /review"
    assert _section(screen, "Extensions") == "  noop.py"
    # pi's footer: the branch after the directory, and an empty context is 0.0% of the window.
    screen = t.wait_for("0.0%/")
    assert f"{work} (trunk)" in screen or "project (trunk)" in screen
    assert "?/" not in screen

    # A refused `/word` is not lost: it stays in the editor to be corrected.
    _run(t, "/revew app.py")
    # The editor is redrawn with the kept text just after the message is printed.
    screen = t.wait_for("❯ /revew app.py", after="Unknown command /revew")
    assert screen.rstrip().count("❯ /revew app.py") == 1
    assert screen.rindex("❯ /revew app.py") > screen.index("Unknown command /revew")
    assert scripted_server.requests_for("polish-header") == []
    t.keys("C-u")
    _run(t, "/quit")
    t.wait_for("[tempi exited 0]")

    # quietStartup hides the list, as in pi.
    (home / "settings.json").write_text(json.dumps({"quietStartup": True}))
    quiet = _open(terminals, work, home, temporal_address)
    assert "[Context]" not in quiet.screen()


def test_aborted_replaces_the_aborting_status_at_once(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(
        tmp_path,
        scripted_server,
        "polish-abort",
        {"select": "sequential", "turns": [{"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 60"}}]}]},
    )  # fmt: skip
    t = _open(terminals, work, home, temporal_address)
    _run(t, "something long")
    t.wait_for("$ sleep 60")
    t.keys("Escape")
    t.wait_for("Aborted.")
    # The status said "Aborting…" for seconds after the abort was done; now it goes with it.
    deadline = time.monotonic() + 1.0
    while "Aborting…" in t.screen().split("Aborted.")[-1]:
        assert time.monotonic() < deadline, t.screen()
        time.sleep(0.05)
