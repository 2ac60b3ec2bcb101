"""pi's `/skill:name args`: the skill's instructions go to the model with the arguments,
in print and RPC mode as in the interactive one (tests/test_interactive_commands.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tempi.agent.skills import Skill
from tempi.cli.slash_input import command_word, expand_skill_command, refusal
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.test_rpc_mode import RpcProcess


def test_a_command_word_is_a_slash_and_a_name_never_a_path(tmp_path: Path) -> None:
    assert command_word("/settings") == "/settings"
    assert command_word("/skill:greet the team") == "/skill:greet"
    assert command_word("/usr/bin/env is missing, why?") is None
    assert command_word("/ 2 is an odd way to write it") is None
    skill_file = tmp_path / "greet" / "SKILL.md"
    skill_file.parent.mkdir()
    skill_file.write_text("---\nname: greet\ndescription: Greet\n---\nSay hello.\n")
    skill = Skill(name="greet", description="Greet", file_path=str(skill_file))
    assert expand_skill_command("/skill:greet all", [skill]) == (
        f'<skill name="greet" location="{skill_file}">\nReferences are relative to {skill_file.parent}.'
        "\n\nSay hello.\n</skill>\n\nall"
    )
    assert refusal("/settingz", [], [skill], ["settings"]) is not None
    assert refusal("/skill:greet", [], [skill], ["settings"]) is None


@pytest.mark.slow
def test_print_mode_expands_a_skill_command(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario("skill-print", [{"text": "greeted"}])
    home, project = tmp_path / "home", tmp_path / "project"
    write_models_json(home, scripted_server, "skill-print")
    skill = project / ".tempi" / "skills" / "greet" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: greet\ndescription: Greet people\n---\nSay hello in Latin.\n")
    done = run_tempi(
        ["--model", "mock/mock-model", "-p", "/skill:greet the team"],
        cwd=project,
        env=tempi_env(home, temporal_address),
    )
    assert done.returncode == 0, done.stderr
    sent = json.dumps(scripted_server.requests_for("skill-print")[-1].body["messages"][-1])
    assert "Say hello in Latin." in sent and "the team" in sent


@pytest.mark.slow
def test_rpc_lists_skills_and_its_prompt_expands_them(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario("skill-rpc", [{"text": "greeted"}])
    home, project = tmp_path / "home", tmp_path / "project"
    write_models_json(home, scripted_server, "skill-rpc")
    skill = project / ".tempi" / "skills" / "greet" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: greet\ndescription: Greet people\n---\nSay hello in Latin.\n")
    rpc = RpcProcess(["--model", "mock/mock-model"], cwd=project, env=tempi_env(home, temporal_address))
    try:
        commands = rpc.call({"id": "c", "type": "get_commands"}, timeout=90)["data"]["commands"]
        assert {"name": "skill:greet", "description": "Greet people", "source": "skill"}.items() <= next(
            c for c in commands if c["name"] == "skill:greet"
        ).items()
        assert rpc.call({"id": "p", "type": "prompt", "message": "/skill:greet the team"})["success"] is True
        rpc.event("agent_end")
        sent = json.dumps(scripted_server.requests_for("skill-rpc")[-1].body["messages"][-1])
        assert "Say hello in Latin." in sent and "the team" in sent
    finally:
        rpc.close()
