"""pi's command-line and slash-command habits in a real terminal (tmux): `tempi "prompt"`
opens the interactive mode with it sent, a `/word` that names nothing never reaches the
model, and pi's /settings, /scoped-models, /reload, /changelog, /clone, /import, /login,
/logout and /share answer."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import tempi_env
from tests.test_interactive_terminal import Terminal, _setup, terminals

# A slow end-to-end group that drives a real terminal, as tests/test_interactive_terminal.py.
pytestmark = [pytest.mark.slow]
__all__ = ["terminals"]  # the fixture, imported for these tests


# The first terminal of a run also waits for a fresh dev server, on a machine that may be busy.
START_S = 90.0


def _open(terminals: list[Terminal], work: Path, home: Path, temporal_address: str, *args: str) -> Terminal:
    t = Terminal(["--model", "mock/mock-model", *args], cwd=work, env=tempi_env(home, temporal_address))
    terminals.append(t)
    t.wait_for("mock/mock-model", timeout=START_S)  # the footer: ready for input
    return t


def _run(t: Terminal, line: str) -> None:
    t.type(line)
    t.keys("Enter")


def test_a_prompt_on_the_command_line_opens_the_interactive_mode_with_it_sent(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(
        tmp_path,
        scripted_server,
        "cmds-argv",
        {"select": "sequential", "turns": [{"text": "First answer."}, {"text": "Second answer."}]},
    )
    t = Terminal(
        ["--model", "mock/mock-model", "what is here?"], cwd=work, env=tempi_env(home, temporal_address)
    )
    terminals.append(t)
    screen = t.wait_for("First answer.", timeout=START_S)
    assert "❯ what is here?" in screen
    # Still open: the editor takes the next prompt, in the same session.
    t.wait_for("mock/mock-model")
    _run(t, "and then?")
    t.wait_for("Second answer.")
    assert "[tempi exited" not in t.screen()
    requests = scripted_server.requests_for("cmds-argv")
    assert "what is here?" in json.dumps(requests[1].body["messages"])
    _run(t, "/quit")
    t.wait_for("[tempi exited 0]")


def test_unknown_commands_are_refused_while_templates_skills_and_pis_commands_answer(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(
        tmp_path,
        scripted_server,
        "cmds-refuse",
        {"select": "sequential", "turns": [{"text": "Skill used."}, {"text": "Template used."}]},
    )
    (home / "prompts").mkdir()
    (home / "prompts" / "review.md").write_text("---\ndescription: Review\n---\nReview $1 strictly.\n")
    skill = work / ".tempi" / "skills" / "greet" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: greet\ndescription: Greet people\n---\nSay hello in Latin.\n")
    t = _open(terminals, work, home, temporal_address)

    _run(t, "/settingz")
    t.wait_for("Unknown command /settingz: nothing was sent to the model.")
    t.keys("C-u")  # the refused line stays in the editor, to be corrected
    _run(t, "/skill:nope")
    t.wait_for("No skill named 'nope'")
    t.keys("C-u")
    for command, answer in [
        ("/login nobody", "No login for 'nobody'"),
        ("/logout", "Usage: /logout <provider>"),
        ("/share", "/export writes the session"),
        ("/changelog", "what's new"),
    ]:
        _run(t, command)
        t.wait_for(answer)
    assert scripted_server.requests_for("cmds-refuse") == []

    # The completion list offers pi's commands.
    t.type("/scop")
    t.wait_for("/scoped-models")
    t.keys("C-u")  # clears the line (a second Ctrl+C would quit)
    # ... and the prompt templates and skills.
    t.type("/rev")
    t.wait_for("/review")
    t.keys("C-u")
    t.type("/skill:gr")
    t.wait_for("/skill:greet")
    t.keys("C-u")

    _run(t, "/skill:greet the team")
    t.wait_for("Skill used.")
    sent = json.dumps(scripted_server.requests_for("cmds-refuse")[0].body["messages"][-1])
    assert '<skill name=\\"greet\\"' in sent and "Say hello in Latin." in sent and "the team" in sent
    _run(t, "/review app.py")
    t.wait_for("Template used.")
    sent = json.dumps(scripted_server.requests_for("cmds-refuse")[1].body["messages"][-1])
    assert "Review app.py strictly." in sent
    _run(t, "/quit")
    t.wait_for("[tempi exited 0]")


def test_settings_and_scoped_models_apply_and_are_saved(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(tmp_path, scripted_server, "cmds-settings", [{"text": "unused"}])
    t = _open(terminals, work, home, temporal_address)
    _run(t, "/settings")
    screen = t.wait_for("Auto-compact")
    assert "21 in all" in screen  # pi's entries, not tempi's first five
    t.type("auto")
    t.keys("Enter")
    t.wait_for("Auto-compact: Automatically compact context")
    t.type("false")
    t.keys("Enter")
    t.wait_for("Auto-compact: false (saved to")
    _run(t, "/settings")
    t.wait_for("Steering mode")
    t.type("steering")
    t.keys("Enter")
    t.wait_for("Steering mode: Enter while")
    t.type("all")
    t.keys("Enter")
    t.wait_for("Steering mode: all (saved to")
    _run(t, "/settings")
    t.wait_for("Autocomplete max items")
    t.type("autocomplete")
    t.keys("Enter")
    t.wait_for("Autocomplete max items: Max visible")
    t.type("3")
    t.keys("Enter")
    t.wait_for("Autocomplete max items: 3 (saved to")
    # An entry tempi has no use for is shown, with a note, and saves nothing.
    _run(t, "/settings")
    t.wait_for("21 in all", after="Autocomplete max items: 3")
    t.type("theme")
    t.keys("Enter")
    t.wait_for("Theme: dark. Not used by tempi: tempi uses the terminal's own colours.")
    saved = json.loads((home / "settings.json").read_text())
    assert saved["compaction"]["enabled"] is False
    assert saved["steeringMode"] == "all"
    assert saved["autocompleteMaxVisible"] == 3
    assert "theme" not in saved

    # /scoped-models holds for this session until Ctrl+S saves it, as in pi.
    _run(t, "/scoped-models")
    t.wait_for("session-only")
    t.type("other")
    t.keys("Enter")
    t.wait_for("Ctrl+P cycles: mock/mock-other (this session; ctrl+s saves)")
    assert "enabledModels" not in json.loads((home / "settings.json").read_text())
    t.keys("C-s")
    t.wait_for("Model selection saved to settings (saved to")
    t.keys("Escape")
    time.sleep(0.5)  # a key right after Esc would read as Alt+key
    assert json.loads((home / "settings.json").read_text())["enabledModels"] == ["mock/mock-other"]
    assert scripted_server.requests_for("cmds-settings") == []
    _run(t, "/quit")
    t.wait_for("[tempi exited 0]")


def test_clone_import_and_reload(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(
        tmp_path,
        scripted_server,
        "cmds-clone",
        {
            "select": "sequential",
            "turns": [{"text": "Original answer."}, {"text": "Reloaded template used."}],
        },
    )
    t = _open(terminals, work, home, temporal_address)
    _run(t, "remember the word ostrich")
    t.wait_for("Original answer.")
    sessions = home / "sessions"
    before = set(sessions.glob("*/*.jsonl"))
    assert len(before) == 1

    _run(t, "/clone")
    t.wait_for("Cloned to new session")
    clones = set(sessions.glob("*/*.jsonl")) - before
    assert len(clones) == 1
    clone = clones.pop()
    assert "ostrich" in clone.read_text() and "Original answer." in clone.read_text()

    # A session file from elsewhere: copied into the sessions folder and continued.
    outside = tmp_path / "elsewhere" / clone.name.replace(".jsonl", "-copy.jsonl")
    outside.parent.mkdir()
    outside.write_text(clone.read_text())
    _run(t, f"/import {outside}")
    t.wait_for("Session imported from:")
    assert (clone.parent / outside.name).is_file()
    _run(t, "/import /nowhere/x.jsonl")
    t.wait_for("Failed to import session: no file /nowhere/x.jsonl")

    # /reload picks up a prompt template written after the start.
    (home / "prompts").mkdir()
    (home / "prompts" / "later.md").write_text("Written after the start: $1\n")
    _run(t, "/reload")
    t.wait_for("Reloaded")
    _run(t, "/later now")
    t.wait_for("Reloaded template used.")
    sent = json.dumps(scripted_server.requests_for("cmds-clone")[-1].body["messages"][-1])
    assert "Written after the start: now" in sent
    _run(t, "/quit")
    t.wait_for("[tempi exited 0]")
