"""pi's prompt templates (`/name args`) and skills (listed in the system prompt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tempi.agent.prompt_templates import expand_prompt_template, parse_command_args, parse_template
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json


def test_arguments_substitute_like_pi() -> None:
    template = parse_template(
        "---\ndescription: Review\n---\nReview $1 for $2; all: $@; rest: ${@:2}; two: ${@:1:2}", "review", "x"
    )
    assert template.description == "Review"
    out = expand_prompt_template('/review app.py "error handling" extra', [template])
    assert (
        out
        == "Review app.py for error handling; all: app.py error handling extra; rest: error handling extra; two: app.py error handling"
    )
    # Values are not expanded again, unknown names and plain text are left alone.
    assert expand_prompt_template("/review $@", [template]).startswith("Review $@ for ;")
    assert expand_prompt_template("/unknown thing", [template]) == "/unknown thing"
    assert expand_prompt_template("no slash", [template]) == "no slash"
    assert parse_command_args("""a 'b c' "d e" f""") == ["a", "b c", "d e", "f"]


def test_description_falls_back_to_the_first_line() -> None:
    assert parse_template(
        "\n\nFix the failing tests in the given module please, carefully and quickly\n", "fix", "x"
    ).description == ("Fix the failing tests in the given module please, carefully ...")


@pytest.mark.slow
def test_templates_expand_and_skills_reach_the_system_prompt(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario("templates", {"select": "sequential", "turns": [{"text": "reviewed"}]})
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "templates")
    (home / "prompts").mkdir(parents=True)
    (home / "prompts" / "review.md").write_text(
        "---\ndescription: Review a file\n---\nReview $1 and be strict about $2.\n"
    )
    project = tmp_path / "project"
    skill = project / ".tempi" / "skills" / "release-notes" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(
        "---\nname: release-notes\ndescription: Write release notes from the git log\n---\nSteps...\n"
    )

    proc = run_tempi(
        ["--model", "mock/mock-model", "-p", "/review app.py naming"],
        cwd=project,
        env=tempi_env(home, temporal_address),
    )
    assert proc.returncode == 0, proc.stderr
    body = scripted_server.requests_for("templates")[-1].body
    messages = json.dumps(body["messages"])
    assert "Review app.py and be strict about naming." in messages
    system = body["messages"][0]["content"]
    assert "<name>release-notes</name>" in system and str(skill) in system
