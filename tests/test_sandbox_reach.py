"""Issue 42, item 5: a sandboxed session's own file is never where its model can reach it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tempi.cli.errors import UserError
from tempi.cli.sandbox_reach import check_sandbox_reach
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, trust_project_as, write_models_json


def test_a_session_folder_inside_the_workspace_is_refused_under_every_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TEMPI_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    work = tmp_path / "work"
    work.mkdir()
    for sandbox in ("bwrap", "docker", "container"):
        with pytest.raises(UserError, match="inside the workspace"):
            check_sandbox_reach(sandbox, work, work / ".sessions")
    check_sandbox_reach("local", work, work / ".sessions")  # no sandbox: nothing to keep out
    check_sandbox_reach("bwrap", work, tmp_path / "sessions")

    # tempi's home inside a container's workspace would be mounted for the model; bwrap hides it.
    monkeypatch.setenv("TEMPI_HOME", str(work / "tempi-home"))
    with pytest.raises(UserError, match="API keys"):
        check_sandbox_reach("docker", work, tmp_path / "sessions")
    check_sandbox_reach("bwrap", work, tmp_path / "sessions")

    monkeypatch.setenv("HOME", str(work))
    check_sandbox_reach("bwrap", work, tmp_path / "sessions")
    assert "holds your whole home directory" in capsys.readouterr().err


def test_a_trusted_projects_session_dir_in_the_workspace_stops_a_bwrap_run_before_it_starts(
    tmp_path: Path, scripted_server: ScriptedLLMServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    (work / ".tempi").mkdir(parents=True)
    (work / ".tempi" / "settings.json").write_text(json.dumps({"sessionDir": "./sessions"}))
    write_models_json(home, scripted_server, "reach")
    trust_project_as(home, work)
    done = run_tempi(
        ["--model", "mock/mock-model", "--sandbox", "bwrap", "-p", "hi"], cwd=work, env=tempi_env(home, None)
    )
    assert done.returncode == 1, done.stderr
    assert f"{work / 'sessions'}, inside the workspace" in done.stderr
    assert not (work / "sessions").exists()
    assert scripted_server.requests_for("reach") == []
