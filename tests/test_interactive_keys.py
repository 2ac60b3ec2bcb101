"""pi's keys in tempi's interactive mode, in a real terminal (tmux): cycling models and
thinking levels, the model picker, tool output collapsed and expanded, thinking blocks
hidden, Shift+Enter, the external editor, an image pasted from the clipboard, suspending."""

from __future__ import annotations

import json
import os
import shlex
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import tempi_env, write_models_json
from tests.test_interactive_terminal import Terminal

pytestmark = pytest.mark.slow

# Starting a worker and a session in a fresh home can be slow on a busy machine.
STARTUP_S = 120.0


class ShellTerminal(Terminal):
    """tempi started from an interactive shell with job control, as a user starts it, so
    that Ctrl+Z hands the terminal back to the shell and `fg` resumes it."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        self.socket = f"tempi-test-{uuid.uuid4().hex[:8]}"
        shell = shlex.join(["env", "-i", f"PATH={env['PATH']}", "PS1=shell$ ", "TERM=tmux-256color",
                            "bash", "--norc", "--noprofile", "-i"])  # fmt: skip
        self._tmux("new-session", "-d", "-x", "110", "-y", "40", "-c", str(cwd), shell)
        self.wait_for("shell$")
        command = shlex.join(["env", "-i", *(f"{k}={v}" for k, v in env.items()), "TERM=tmux-256color",
                              sys.executable, "-m", "tempi", *args])  # fmt: skip
        self.type(command)
        self.keys("Enter")


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for t in opened:
        t.close()


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


def _open(
    terminals: list[Terminal],
    work: Path,
    home: Path,
    temporal_address: str,
    *,
    shell: bool = False,
    **env: str,
) -> Terminal:
    kind = ShellTerminal if shell else Terminal
    t = kind(["--model", "mock/mock-model"], cwd=work, env=tempi_env(home, temporal_address, **env))
    terminals.append(t)
    t.wait_for("mock/mock-model • thinking", timeout=STARTUP_S)
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
    t = _open(
        terminals,
        work,
        home,
        temporal_address,
        shell=True,
        EDITOR=str(editor),
        PATH=path,
        TMPDIR=str(tmp_path),
    )
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
    t.wait_for("tempi-clipboard-")
    [pasted] = list(tmp_path.glob("tempi-clipboard-*.png"))
    assert pasted.read_bytes() == png

    # Ctrl+Z hands the terminal back to the shell; `fg` brings tempi back as it was.
    t.keys("C-z")
    t.wait_for("Stopped")
    t.type("fg")
    t.keys("Enter")
    # Below the shell's own line: the pasted file's random name may hold "fg" itself.
    t.wait_for("from the editor", after="shell$ fg")
    t.keys("Enter")
    t.wait_for("Got all three lines.")
    body = json.dumps(scripted_server.requests_for("keys-editor")[-1].body)
    assert "first line\\nsecond line\\nfrom the editor" in body
    t.keys("C-c")
    t.keys("C-d")
    t.wait_for("is kept")


def test_footer_counts_tokens_and_cost_during_a_run_and_agrees_across_terminals(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(
        tmp_path,
        scripted_server,
        "keys-footer",
        [
            {"text": "Let me wait.", "tool_calls": [{"name": "bash", "arguments": {"command": "sleep 60"}}],
             "usage": {"input": 1200, "output": 340, "cacheRead": 5000, "cacheWrite": 800}},
            {"text": "Done waiting.", "usage": {"input": 1500, "output": 60, "cacheRead": 0, "cacheWrite": 0}},
        ],
    )  # fmt: skip
    first = _open(terminals, work, home, temporal_address)
    first.type("wait please")
    first.keys("Enter")
    first.wait_for("$ sleep 60")
    # pi's stats, counted as the run goes: the first answer's tokens and cost (the model
    # costs $3/$15/$0.3/$3.75 per million), its context against the window, auto-compaction on.
    during = "↑1.2k ↓340 R5.0k W800 $0.013 5.7%/128k (auto)"
    first.wait_for(during)
    # Another terminal joining the running session (the command runs long enough for it to
    # start on a busy machine) shows the same.
    second = Terminal(["--continue"], cwd=work, env=tempi_env(home, temporal_address))
    terminals.append(second)
    screen = second.wait_for(during, timeout=STARTUP_S)
    assert "Done waiting." not in screen
    after = "↑2.7k ↓400 R5.0k W800 $0.019 1.2%/128k (auto)"
    first.wait_for("Done waiting.", timeout=90)
    first.wait_for(after)
    second.wait_for(after)


def test_tree_with_connectors_folding_and_the_summarize_question(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, terminals: list[Terminal]
) -> None:
    home, work = _setup(
        tmp_path,
        scripted_server,
        "keys-tree",
        {
            "select": "sequential",
            "turns": [{"text": "First answer."}, {"text": "Second answer."}, {"text": "Third answer."}],
            "summary": "The branch asked a second question.",
        },
    )
    t = _open(terminals, work, home, temporal_address)
    for question, answer in (("first question", "First answer."), ("second question", "Second answer.")):
        t.type(question)
        t.keys("Enter")
        t.wait_for(answer)
    t.type("/tree")
    t.keys("Enter")
    screen = t.wait_for("(4/4)")
    assert "› • assistant: Second answer." in screen
    t.keys("Up", "Up")
    t.wait_for("› • assistant: First answer.")
    t.keys("Enter")
    t.wait_for("Summarize branch?")
    t.keys("Escape")  # back to the tree, on the same entry
    screen = t.wait_for("(2/4)")
    assert "› • assistant: First answer." in screen and "Summarize branch?" not in screen
    t.keys("Enter")
    t.wait_for("No summary")
    t.keys("Enter")
    screen = t.wait_for("Navigated to selected point")
    # The transcript is drawn again for the branch now current.
    assert "First answer." in screen and "Second answer." not in screen

    t.type("another way")
    t.keys("Enter")
    t.wait_for("Third answer.")
    t.type("/tree")
    t.keys("Enter")
    screen = t.wait_for("(4/6)", after="another way")
    tree = [line.rstrip() for line in screen[screen.rfind("Session Tree") :].splitlines()]
    assert tree[3:9] == [
        "  • user: first question",
        "  • assistant: First answer.",
        "  ├⊟ • user: another way",
        "› │     • assistant: Third answer.",
        "  └⊟ user: second question",
        "        assistant: Second answer.",
    ]
    # Ctrl+Left from the leaf goes up to its branch's start, then folds it.
    t.keys("C-Left")
    t.wait_for("› ├⊟ • user: another way")
    t.keys("C-Left")
    screen = t.wait_for("› ├⊞ • user: another way")
    assert "Third answer.\n  └⊟" not in screen and "(3/5)" in screen
    t.keys("Down", "Enter")
    t.wait_for("Summarize branch?")
    t.keys("Down", "Enter")
    t.wait_for("Navigated to selected point")
    # Choosing a user message puts it back in the editor; the branch left has a summary.
    screen = t.wait_for("❯ second question", after="Navigated to selected point")
    assert "summary of another branch" in screen
    t.keys("C-c")
    t.keys("C-c")
    t.wait_for("[tempi exited 0]")
