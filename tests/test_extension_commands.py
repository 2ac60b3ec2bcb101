"""Extensions' slash commands in each front end, through real `tempi` processes against
the dev server and the scripted model: the prompt a command makes, the notices it shows
(`ctx.ui.notify`) and the messages it queues (`tempi.send_message`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, trust_project_as, write_models_json
from tests.test_interactive_terminal import Terminal, terminals
from tests.test_rpc_mode import RpcProcess

pytestmark = pytest.mark.slow
__all__ = ["terminals"]  # the fixture, imported for the terminal test

EXTENSIONS = Path(__file__).parent / "extensions"
# Each run: the command's prompt, then the reminder it queued as a follow-up.
TURNS = [{"text": "Started."}, {"text": "Checked."}]


def _project(
    tmp_path: Path, server: ScriptedLLMServer, scenario: str, turns: list[dict[str, str]]
) -> tuple[Path, Path]:
    server.add_scenario(scenario, {"select": "sequential", "turns": turns})
    home, work = tmp_path / "home", tmp_path / "project"
    (work / ".tempi" / "extensions").mkdir(parents=True)
    shutil.copy(EXTENSIONS / "memory.py", work / ".tempi" / "extensions" / "memory.py")
    write_models_json(home, server, scenario)
    trust_project_as(home, work)
    return home, work


def _last_user_texts(server: ScriptedLLMServer, scenario: str) -> list[str]:
    """What each model request ended with: the user message that started that call."""
    return [json.dumps(r.body["messages"][-1]) for r in server.requests_for(scenario)]


def test_a_command_in_print_mode_prompts_queues_its_reminder_and_notifies_on_stderr(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-cmd-print"
    home, work = _project(tmp_path, scripted_server, scenario, TURNS)
    done = run_tempi(
        ["--model", "mock/mock-model", "-p", "/remind the logs"],
        cwd=work,
        env=tempi_env(home, temporal_address),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Checked.\n"
    assert "Reminder about the logs queued (without a screen)." in done.stderr
    sent = _last_user_texts(scripted_server, scenario)
    assert len(sent) == 2
    assert "Start on the logs." in sent[0] and "/remind" not in sent[0]
    assert "Remember to check the logs." in sent[1]


def test_a_command_over_rpc_sends_pis_notify_request_and_its_follow_up_reaches_the_model(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-cmd-rpc"
    home, work = _project(tmp_path, scripted_server, scenario, TURNS)
    rpc = RpcProcess(
        ["--model", "mock/mock-model", "--no-session"], cwd=work, env=tempi_env(home, temporal_address)
    )
    try:
        assert rpc.call({"id": "p", "type": "prompt", "message": "/remind the docs"}, timeout=90)["success"]
        # Shown while the command ran, before the prompt's response, as in pi.
        shown = next(m for m in rpc.seen if isinstance(m, dict) and m.get("type") == "extension_ui_request")
        assert shown["method"] == "notify" and shown["notifyType"] == "warning"
        assert shown["message"] == "Reminder about the docs queued (on screen)."
        assert isinstance(shown["id"], str) and shown["id"]
        # The follow-up runs when the prompt's run would stop: two model calls, one agent_end.
        rpc.event("agent_end", timeout=60)
        sent = _last_user_texts(scripted_server, scenario)
        assert len(sent) == 2
        assert "Start on the docs." in sent[0] and "Remember to check the docs." in sent[1]
    finally:
        rpc.close()


def test_commands_typed_in_the_terminal_prompt_notify_and_queue(
    tmp_path: Path,
    temporal_address: str,
    scripted_server: ScriptedLLMServer,
    terminals: list[Terminal],
) -> None:
    scenario = "ext-cmd-tui"
    home, work = _project(tmp_path, scripted_server, scenario, [{"text": "Hello, Bob."}, *TURNS])
    t = Terminal(["--model", "mock/mock-model"], cwd=work, env=tempi_env(home, temporal_address))
    terminals.append(t)
    t.wait_for("mock/mock-model", timeout=90)  # the footer: ready for input
    t.type("/greet Bob")
    t.keys("Enter")
    t.wait_for("Hello, Bob.")
    t.type("/remind the tests")
    t.keys("Enter")
    screen = t.wait_for("Checked.", timeout=60)
    assert "Reminder about the tests queued (on screen)." in screen
    assert "Started." in screen
    sent = _last_user_texts(scripted_server, scenario)
    assert "Say hello to Bob." in sent[0] and "/greet" not in sent[0]
    assert "Start on the tests." in sent[1] and "Remember to check the tests." in sent[2]
    t.type("/quit")
    t.keys("Enter")
    t.wait_for("[tempi exited 0]")
