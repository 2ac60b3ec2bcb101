"""`--session NEW.jsonl` (issue 36, item 3): a session file that does not exist yet is
created there, as pi does, and the same flag continues it afterwards."""

from __future__ import annotations

import json
from pathlib import Path

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json


def test_session_naming_a_new_file_starts_the_session_in_it(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "session-new-file", {"select": "sequential", "turns": [{"text": "first"}, {"text": "second"}]}
    )
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_models_json(home, scripted_server, "session-new-file")
    env = tempi_env(home, temporal_address)
    args = ["--model", "mock/mock-model", "--session", "notes/new.jsonl", "-p"]

    done = run_tempi([*args, "Remember 42"], cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "first"
    made = work / "notes" / "new.jsonl"
    lines = [json.loads(line) for line in made.read_text().splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["cwd"] == str(work)
    assert [e["message"]["role"] for e in lines if e["type"] == "message"] == ["user", "assistant"]
    assert not list((home / "sessions").glob("*/*.jsonl"))

    again = run_tempi([*args, "What was it?"], cwd=work, env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "second"
    assert "Remember 42" in json.dumps(scripted_server.requests_for("session-new-file")[1].body["messages"])
    assert json.loads(made.read_text().splitlines()[0])["id"] == lines[0]["id"]
