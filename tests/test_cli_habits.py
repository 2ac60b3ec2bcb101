"""Command-line habits a pi user (or any shell user) brings: a closed pipe is not an
error, --help and --version answer, and pi's package commands never become prompts.
Through the real `tempi` executable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json


def test_a_reader_that_stops_early_ends_tempi_without_a_traceback(tmp_path: Path) -> None:
    # `tempi sessions list | head -1`: the reader is gone before tempi writes its lines.
    proc = subprocess.Popen(
        [sys.executable, "-m", "tempi", "sessions", "list"],
        cwd=tmp_path,
        env=tempi_env(tmp_path / "home", None),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    errors = proc.stderr.read().decode()
    # 141: what a shell reports for any program whose reader closed the pipe.
    assert proc.wait(timeout=60) == 141
    assert errors == ""


def test_help_tells_of_the_interactive_mode_and_version_answers(tmp_path: Path) -> None:
    env = tempi_env(tmp_path / "home", None)
    shown = run_tempi(["--help"], cwd=tmp_path, env=env)
    assert shown.returncode == 0
    assert "bare `tempi`" in shown.stdout and "interactive mode" in shown.stdout
    assert "--version" in shown.stdout
    version = run_tempi(["--version"], cwd=tmp_path, env=env)
    assert version.returncode == 0 and version.stdout.startswith("tempi ")


@pytest.mark.parametrize(
    ("argv", "offered"),
    [
        (["list"], "tempi sessions list"),
        (["config"], "settings.json"),
        (["install"], "SKILL.md"),
        (["remove"], "delete them"),
        (["update"], "the way you installed it"),
        (["--continue", "update"], "the way you installed it"),
    ],
)
def test_pis_package_commands_never_reach_the_model(
    argv: list[str],
    offered: str,
    tmp_path: Path,
    temporal_address: str,
    scripted_server: ScriptedLLMServer,
) -> None:
    scenario = f"habits-{'-'.join(argv)}"
    scripted_server.add_scenario(scenario, [{"text": "a word became a prompt"}])
    home = tmp_path / "home"
    write_models_json(home, scripted_server, scenario)
    done = run_tempi(
        ["--model", "mock/mock-model", *argv], cwd=tmp_path, env=tempi_env(home, temporal_address)
    )
    assert done.returncode == 1
    word = argv[-1]
    assert f"`tempi {word}` is a pi command" in done.stderr and offered in done.stderr
    assert f"tempi -p {word}" in done.stderr  # how to send the word as a prompt after all
    assert scripted_server.requests_for(scenario) == []


def test_the_word_goes_to_the_model_when_it_is_meant_as_a_prompt(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario("habits-prompt", [{"text": "listed"}])
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "habits-prompt")
    env = tempi_env(home, temporal_address)
    done = run_tempi(["--model", "mock/mock-model", "-p", "list"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "listed"
    done = run_tempi(["--model", "mock/mock-model", "list the files here"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "listed"
