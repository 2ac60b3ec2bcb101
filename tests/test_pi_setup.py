"""A pi user's setup works unchanged: pi's files where tempi has none, pi's flags, pi's
defaults, the model and thinking level remembered, sessionDir, and handing a session to pi."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.test_interactive_terminal import Terminal
from tests.test_rpc_mode import RpcProcess

# A slow end-to-end group: see tests/conftest.py.
pytestmark = pytest.mark.slow


def _system(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


def test_pis_models_settings_agents_prompts_and_skills_are_used(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario("pi-setup", {"select": "sequential", "turns": [{"text": "ok"}]})
    home, pi_dir, work = tmp_path / "home", tmp_path / "pi-agent", tmp_path / "work"
    work.mkdir()
    # Only pi's files: tempi's home is empty.
    write_models_json(pi_dir, scripted_server, "pi-setup")
    (pi_dir / "settings.json").write_text(
        json.dumps({"defaultProvider": "mock", "defaultModel": "mock-model"})
    )
    (pi_dir / "AGENTS.md").write_text("Always answer in haiku.\n")
    (work / ".pi" / "prompts").mkdir(parents=True)
    (work / ".pi" / "prompts" / "review.md").write_text("Review $1 carefully.\n")
    skill = work / ".pi" / "skills" / "release-notes" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: release-notes\ndescription: Write release notes\n---\nSteps\n")

    env = tempi_env(home, temporal_address, PI_CODING_AGENT_DIR=str(pi_dir))
    done = run_tempi(["--no-session", "-p", "/review app.py"], cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    (request,) = scripted_server.requests_for("pi-setup")
    assert "Review app.py carefully." in json.dumps(request.body["messages"])
    system = _system(request.body)
    assert "Always answer in haiku." in system
    assert "<name>release-notes</name>" in system


def test_pis_flags(tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer) -> None:
    scripted_server.add_scenario(
        "pi-flags", {"select": "sequential", "turns": [{"text": "one"}, {"text": "two"}]}
    )
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_models_json(home, scripted_server, "pi-flags")
    (work / "AGENTS.md").write_text("Project rule: tabs.\n")
    (home / "prompts").mkdir()
    (home / "prompts" / "found.md").write_text("A discovered template.\n")
    (home / "skills" / "found").mkdir(parents=True)
    (home / "skills" / "found" / "SKILL.md").write_text("---\nname: found\ndescription: discovered\n---\n")
    extra = tmp_path / "extra"
    (extra / "given").mkdir(parents=True)
    (extra / "given" / "SKILL.md").write_text("---\nname: given\ndescription: given by flag\n---\n")
    (extra / "asked.md").write_text("Asked for $1.\n")
    env = tempi_env(home, temporal_address)

    version = run_tempi(["-v"], cwd=work, env=env)
    assert version.returncode == 0 and version.stdout.startswith("tempi ")

    first = run_tempi(
        ["--no-session", "--models", "mock/*", "-nc", "--no-skills", "--skill", str(extra / "given"),
         "--no-prompt-templates", "--prompt-template", str(extra / "asked.md"), "--offline", "--verbose",
         "-p", "/asked tea"],
        cwd=work,
        env=env,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    body = scripted_server.requests_for("pi-flags")[0].body
    system = _system(body)
    assert "Project rule: tabs." not in system
    assert "<name>given</name>" in system and "<name>found</name>" not in system
    assert "Asked for tea." in json.dumps(body["messages"])
    assert {t["function"]["name"] for t in body["tools"]} == {"read", "bash", "edit", "write"}

    second = run_tempi(["--no-session", "-nbt", "-p", "/found"], cwd=work, env=env)
    assert second.returncode == 0, second.stderr
    body = scripted_server.requests_for("pi-flags")[1].body
    assert "tools" not in body or not body["tools"]
    assert "A discovered template." in json.dumps(body["messages"])

    no_tools = run_tempi(["--no-session", "-nt", "-p", "hi"], cwd=work, env=env)
    assert no_tools.returncode == 0, no_tools.stderr


def test_thinking_defaults_to_medium_and_switches_are_saved_to_settings(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "pi-defaults", {"select": "sequential", "turns": [{"text": "a"}, {"text": "b"}]}
    )
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    # Two models that think, so thinking levels apply.
    write_models_json(
        home, scripted_server, "pi-defaults", model_id="thinker-a", more_models=("thinker-b",), reasoning=True
    )
    env = tempi_env(home, temporal_address)

    first = run_tempi(["--no-session", "--model", "mock/thinker-a", "-p", "hi"], cwd=work, env=env)
    assert first.returncode == 0, first.stderr
    assert scripted_server.requests_for("pi-defaults")[0].body.get("reasoning_effort") == "medium"

    rpc = RpcProcess(["--no-session", "--model", "mock/thinker-a"], cwd=work, env=env)
    try:
        assert rpc.call({"type": "set_model", "provider": "mock", "modelId": "thinker-b"}, 120)["success"]
        assert rpc.call({"type": "set_thinking_level", "level": "high"})["success"]
    finally:
        rpc.close()
    saved = json.loads((home / "settings.json").read_text())
    assert (saved["defaultProvider"], saved["defaultModel"], saved["defaultThinkingLevel"]) == (
        "mock",
        "thinker-b",
        "high",
    )

    # The next run starts where the last one left off, with no flags.
    second = run_tempi(["--no-session", "-p", "again"], cwd=work, env=env)
    assert second.returncode == 0, second.stderr
    request = scripted_server.requests_for("pi-defaults")[1].body
    assert (request["model"], request.get("reasoning_effort")) == ("thinker-b", "high")


def test_models_json_is_reread_when_it_changes(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario("pi-reread", [{"text": "ok"}])
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_models_json(home, scripted_server, "pi-reread")
    rpc = RpcProcess(
        ["--no-session", "--model", "mock/mock-model"], cwd=work, env=tempi_env(home, temporal_address)
    )
    try:
        before = rpc.call({"type": "get_available_models"}, 120)["data"]["models"]
        assert "added-later" not in [m["id"] for m in before]
        write_models_json(home, scripted_server, "pi-reread", model_id="added-later")
        after = rpc.call({"type": "get_available_models"})["data"]["models"]
        assert "added-later" in [m["id"] for m in after]
    finally:
        rpc.close()


def test_session_dir_is_honoured_and_a_session_goes_to_pi_by_path(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "pi-session-dir",
        {"select": "sequential", "turns": [{"text": "first answer"}, {"text": "second answer"}]},
    )
    home, work, flat = tmp_path / "home", tmp_path / "work", tmp_path / "flat-sessions"
    work.mkdir()
    write_models_json(home, scripted_server, "pi-session-dir")
    (home / "settings.json").write_text(json.dumps({"sessionDir": str(flat)}))
    env = tempi_env(home, temporal_address)

    made = run_tempi(["--model", "mock/mock-model", "-p", "remember the kiwi"], cwd=work, env=env)
    assert made.returncode == 0, made.stderr
    (session_file,) = flat.glob("*.jsonl")  # pi keeps sessionDir's files flat
    session_id = json.loads(session_file.read_text().splitlines()[0])["id"]

    again = run_tempi(["--model", "mock/mock-model", "--continue", "-p", "and now?"], cwd=work, env=env)
    assert again.returncode == 0, again.stderr
    assert "remember the kiwi" in json.dumps(
        scripted_server.requests_for("pi-session-dir")[1].body["messages"]
    )
    assert list(flat.glob("*.jsonl")) == [session_file]

    listed = run_tempi(["sessions", "list", "--no-status", "--json"], cwd=work, env=env)
    assert listed.returncode == 0, listed.stderr
    assert session_id in [json.loads(line)["id"] for line in listed.stdout.splitlines()]

    path = run_tempi(["sessions", "path", session_id[:8]], cwd=work, env=env)
    assert path.returncode == 0, path.stderr
    assert path.stdout.strip() == str(session_file)


# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def test_shell_command_prefix_and_blocked_images(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "pi-settings-keys",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": "echo $GREETING"}}]},
                {"text": "done"},
            ],
        },
    )
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_models_json(home, scripted_server, "pi-settings-keys")
    models = json.loads((home / "models.json").read_text())
    models["providers"]["mock"]["models"][0]["input"] = ["text", "image"]
    (home / "models.json").write_text(json.dumps(models))
    settings = {"shellCommandPrefix": "GREETING=from-the-prefix", "images": {"blockImages": True}}
    (home / "settings.json").write_text(json.dumps(settings))
    (work / "dot.png").write_bytes(PNG)

    done = run_tempi(
        ["--no-session", "--model", "mock/mock-model", "-p", "@dot.png", "what is this?"],
        cwd=work,
        env=tempi_env(home, temporal_address),
    )
    assert done.returncode == 0, done.stderr
    first, second = (r.body for r in scripted_server.requests_for("pi-settings-keys"))
    sent = json.dumps(first["messages"])
    assert "image_url" not in sent and "Image reading is disabled." in sent
    tool_result = [m for m in second["messages"] if m["role"] == "tool"][-1]
    assert "from-the-prefix" in json.dumps(tool_result["content"])


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_hide_thinking_block_and_quiet_startup_in_the_terminal(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "pi-quiet",
        {"select": "sequential", "turns": [{"thinking": "secret musings", "text": "visible answer"}]},
    )
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_models_json(
        home, scripted_server, "pi-quiet", model_id="thinker-a", more_models=("thinker-b",), reasoning=True
    )
    (home / "settings.json").write_text(json.dumps({"hideThinkingBlock": True, "quietStartup": True}))
    terminal = Terminal(["--model", "mock/thinker-a"], cwd=work, env=tempi_env(home, temporal_address))
    try:
        terminal.wait_for("mock/thinker-a", timeout=120)
        terminal.type("hi")
        terminal.keys("Enter")
        screen = terminal.wait_for("visible answer", timeout=90)
        assert "Thinking..." in screen and "secret musings" not in screen
        assert "Ctrl+C twice quits" not in screen  # quietStartup: no startup header
    finally:
        terminal.close()


def test_abort_steer_and_stop_find_a_running_session_in_the_session_dir(
    tmp_path: Path, temporal_address: str
) -> None:
    """Issue 42: `tempi abort ID` (and steer, stop) found sessions by id prefix only under
    ~/.tempi/sessions, not in settings.json's sessionDir where `sessions` finds them."""
    home, work, flat = tmp_path / "home", tmp_path / "work", tmp_path / "flat-sessions"
    work.mkdir()
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"sessionDir": str(flat)}))
    env = tempi_env(home, temporal_address)

    made = run_tempi(["--model", "faux/demo", "-p", "hello"], cwd=work, env=env)
    assert made.returncode == 0, made.stderr
    (session_file,) = flat.glob("*.jsonl")
    prefix = json.loads(session_file.read_text().splitlines()[0])["id"][:8]

    for command in (["abort", prefix], ["steer", prefix, "and now?"], ["stop", prefix]):
        done = run_tempi(command, cwd=work, env=env)
        assert done.returncode == 0, f"tempi {command[0]}: {done.stderr}"
    assert "stopped" in done.stderr
