"""pi's keys in tempi's interactive mode, in a real terminal (tmux): cycling models and
thinking levels, the model picker, tool output collapsed and expanded, thinking blocks
hidden, Shift+Enter, the external editor, an image pasted from the clipboard, suspending."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import tempi_env, write_models_json
from tests.test_interactive_terminal import Terminal, terminals  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow

# Starting a worker and a session in a fresh home can be slow on a busy machine.
STARTUP_S = 120.0


def _setup(tmp_path: Path, server: ScriptedLLMServer, scenario: str, script: Any) -> tuple[Path, Path]:
    """A home with two models on the scripted server: mock-model, which cannot think, and
    Mock Thinker, which can (Anthropic's API, so its thinking is streamed)."""
    server.add_scenario(scenario, script)
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir(parents=True)
    write_models_json(home, server, scenario)
    models = json.loads((home / "models.json").read_text())
    plain = models["providers"]["mock"]
    plain["models"].append(dict(plain["models"][0], id="mock-thinker", name="Mock Thinker", reasoning=True))
    plain["api"] = "anthropic-messages"
    plain["baseUrl"] = server.url_for(scenario, "anthropic-messages")
    (home / "models.json").write_text(json.dumps(models))
    return home, work


def _open(terminals: list[Terminal], work: Path, home: Path, temporal_address: str, **env: str) -> Terminal:
    t = Terminal(
        ["--model", "mock/mock-model"], cwd=work, env=tempi_env(home, temporal_address, **env)
    )
    terminals.append(t)
    t.wait_for("mock/mock-model", timeout=STARTUP_S)
    return t


def test_model_and_thinking_keys(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(
        tmp_path,
        scripted_server,
        "keys-thinking",
        [{"thinking": "pondering the question deeply", "text": "Answer with thought."}],
    )
    t = _open(terminals, work, home, temporal_address)
    t.keys("BTab")
    t.wait_for("Current model does not support thinking")
    t.keys("C-p")
    t.wait_for("Switched to Mock Thinker (thinking: medium)")
    t.wait_for("mock/mock-thinker • thinking medium")
    t.keys("BTab")
    t.wait_for("Thinking level: high")
    t.wait_for("mock/mock-thinker • thinking high")
    t.keys("BTab")
    t.wait_for("Thinking level: off")
    t.keys("C-p")
    t.wait_for("Switched to mock-model")
    t.wait_for("mock/mock-model • thinking off")
    # Ctrl+L opens the model picker; choosing there works as /model does.
    t.keys("C-l")
    t.wait_for("Choose a model")
    t.type("thinker")
    t.keys("Enter")
    t.wait_for("Model: mock/mock-thinker")

    t.type("think about it")
    t.keys("Enter")
    screen = t.wait_for("Answer with thought.")
    assert "pondering the question deeply" in screen
    # Ctrl+T hides thinking blocks: the transcript is drawn again with a placeholder.
    t.keys("C-t")
    screen = t.wait_for("Thinking blocks: hidden")
    assert "pondering the question deeply" not in screen
    assert "Thinking..." in screen and "Answer with thought." in screen
    t.keys("C-t")
    screen = t.wait_for("Thinking blocks: visible")
    assert "pondering the question deeply" in screen
    t.keys("C-c")
    t.keys("C-d")
    t.wait_for("[tempi exited 0]")


def test_tool_output_is_collapsed_as_pi_and_ctrl_o_expands_it(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(
        tmp_path,
        scripted_server,
        "keys-collapse",
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "seq -f 'n%g' 1 30"}}]},
            {"text": "Counted them."},
        ],
    )
    t = _open(terminals, work, home, temporal_address)
    t.type("count")
    t.keys("Enter")
    screen = t.wait_for("Counted them.")
    # The model's commands show their last 5 lines, with what is hidden said above them.
    tool = screen.split("$ seq -f 'n%g' 1 30", 1)[1]
    assert "... (25 earlier lines, ctrl+o to expand)" in tool
    assert "n26\n" in tool and "n30" in tool and "n25\n" not in tool
    # The user's own commands show their last 20.
    t.type("!seq -f 'u%g' 1 40")
    t.keys("Enter")
    screen = t.wait_for("... 20 more lines (ctrl+o to expand)")
    mine = screen.split("$ seq -f 'u%g' 1 40", 1)[1]
    assert "u21\n" in mine and "u40" in mine and "u20\n" not in mine

    t.keys("C-o")
    screen = t.wait_for("(ctrl+o to collapse)")
    assert "n1\n" in screen and "u1\n" in screen and "ctrl+o to expand" not in screen
    t.keys("C-o")
    screen = t.wait_for("... (25 earlier lines, ctrl+o to expand)")
    assert "n1\n" not in screen and "u20\n" not in screen
    t.keys("C-c")
    t.keys("C-d")
    t.wait_for("[tempi exited 0]")


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_shift_enter_external_editor_paste_image_and_suspend(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(tmp_path, scripted_server, "keys-editor", [{"text": "Got all three lines."}])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    editor = bin_dir / "append-editor"
    editor.write_text("#!/bin/sh\nprintf '\\nfrom the editor\\n' >> \"$1\"\n")
    # The clipboard, as xclip reports it: one PNG image.
    png = b"\x89PNG\r\n\x1a\nscripted-image"
    (tmp_path / "clip.png").write_bytes(png)
    xclip = bin_dir / "xclip"
    xclip.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f"  *TARGETS*) printf 'TARGETS\\nimage/png\\n' ;;\n"
        f"  *image/png*) cat {tmp_path / 'clip.png'} ;;\n"
        "  *) exit 1 ;;\n"
        "esac\n"
    )
    for script in (editor, xclip):
        script.chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    t = _open(terminals, work, home, temporal_address, EDITOR=str(editor), PATH=path, TMPDIR=str(tmp_path))
    # tmux reports Shift+Enter apart from Enter to programs that ask, as tempi does.
    t._tmux("set-option", "-s", "extended-keys", "on")

    t.type("first line")
    t.keys("S-Enter")
    t.type("second line")
    screen = t.wait_for("  second line")
    assert "❯ first line\n" in screen

    t.keys("C-g")
    t.wait_for("  from the editor")

    t.keys("C-v")
    screen = t.wait_for(".png")
    [pasted] = list(tmp_path.glob("tempi-clipboard-*.png"))
    assert pasted.read_bytes() == png
    assert str(pasted) in screen.replace("\n", "")

    # Ctrl+Z stops the process (its shell would take over); SIGCONT brings it back.
    shell = int(t._tmux("display-message", "-p", "#{pane_pid}").strip())
    pid = int(subprocess.run(["pgrep", "-P", str(shell)], capture_output=True, text=True).stdout.split()[0])
    t.keys("C-z")
    deadline = time.monotonic() + 10
    while not _stopped(pid):
        assert time.monotonic() < deadline, "Ctrl+Z did not suspend tempi"
        time.sleep(0.1)
    os.killpg(os.getpgid(pid), 18)  # SIGCONT, as `fg` sends
    t.keys("Enter")
    t.wait_for("Got all three lines.")
    body = json.dumps(scripted_server.requests_for("keys-editor")[-1].body)
    assert "first line\\nsecond line\\nfrom the editor" in body
    t.keys("C-c")
    t.keys("C-d")
    t.wait_for("[tempi exited 0]")
