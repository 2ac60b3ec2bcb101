"""The main command's flags, through the real `tempi` executable and the scripted LLM."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json

# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def _setup(
    tmp_path: Path, server: ScriptedLLMServer, scenario: str, turns: list[dict[str, Any]]
) -> tuple[Path, Path]:
    server.add_scenario(scenario, turns)
    home, work = tmp_path / "home", tmp_path / "project" / "sub"
    work.mkdir(parents=True)
    write_models_json(home, server, scenario)
    return home, work


def _user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for m in body["messages"]:
        if m["role"] != "user":
            continue
        content = m["content"]
        texts.append(
            content
            if isinstance(content, str)
            else "".join(p.get("text", "") for p in content if p.get("type") == "text")
        )
    return texts


@pytest.mark.slow
def test_stdin_files_and_several_messages_make_the_prompts(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home, work = _setup(tmp_path, scripted_server, "cli-prompts", [{"text": "one"}, {"text": "two"}])
    (work / "notes.txt").write_text("remember the milk\n")
    (work / "dot.png").write_bytes(PNG)
    (tmp_path / "project" / "AGENTS.md").write_text("Always answer in haiku.\n")
    (home / "AGENTS.md").write_text("The user likes tea.\n")
    models = json.loads((home / "models.json").read_text())
    models["providers"]["mock"]["models"][0]["input"] = ["text", "image"]
    (home / "models.json").write_text(json.dumps(models))
    proc = run_tempi(
        ["--model", "mock/mock-model", "--no-session", "--append-system-prompt", "Be brief.",
         "-p", "@notes.txt", "@dot.png", "first question", "second question"],
        cwd=work,
        env=tempi_env(home, temporal_address),
        input="piped text\n",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "two\n"
    requests = scripted_server.requests_for("cli-prompts")
    assert len(requests) == 2
    first = _user_texts(requests[0].body)[0]
    assert first.startswith("piped text\n<file name=")
    assert "remember the milk" in first and first.endswith("first question")
    assert _user_texts(requests[1].body)[-1] == "second question"
    image_parts = [
        p
        for p in requests[0].body["messages"][-1]["content"]
        if isinstance(p, dict) and p.get("type") == "image_url"
    ]
    assert len(image_parts) == 1
    system = requests[0].body["messages"][0]["content"]
    assert "Be brief." in system
    # Context files: $TEMPI_HOME first, then the project's, nearest last.
    assert system.index("The user likes tea.") < system.index("Always answer in haiku.")
    # --no-session keeps nothing.
    assert not list((home / "sessions").rglob("*.jsonl")) if (home / "sessions").exists() else True


def test_user_errors_say_what_to_do(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home, work = _setup(tmp_path, scripted_server, "cli-errors", [{"text": "never"}])
    env = tempi_env(home, temporal_address)
    unknown = run_tempi(["--model", "mock/mock-modle", "-p", "hi"], cwd=work, env=env)
    assert unknown.returncode == 1
    assert 'Model "mock/mock-modle" not found' in unknown.stderr and "mock/mock-model" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    missing = run_tempi(
        ["--model", "mock/mock-model", "--session", "deadbeef", "-p", "hi"], cwd=work, env=env
    )
    assert missing.returncode == 1 and "tempi sessions list" in missing.stderr
    resume = run_tempi(["--model", "mock/mock-model", "--resume", "-p", "hi"], cwd=work, env=env)
    assert resume.returncode == 1 and "--session" in resume.stderr
    absent = run_tempi(["--model", "mock/mock-model", "-p", "@nothing-here.txt", "hi"], cwd=work, env=env)
    assert absent.returncode == 1 and "File not found" in absent.stderr
    listed = run_tempi(["--list-models", "mock"], cwd=work, env=env)
    assert listed.returncode == 0
    assert [line.split()[:2] for line in listed.stdout.splitlines()[1:]] == [["mock", "mock-model"]]


@pytest.mark.slow
def test_sessions_list_show_export_and_continue(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home, work = _setup(
        tmp_path, scripted_server, "cli-sessions", [{"text": "Created <b>.", "tool_calls": [
            {"name": "write", "arguments": {"path": "a.txt", "content": "x\n"}}]},
            {"text": "done"}, {"text": "continued"}],
    )  # fmt: skip
    env = tempi_env(home, temporal_address)
    first = run_tempi(["--model", "mock/mock-model", "-p", "make a.txt"], cwd=work, env=env)
    assert first.returncode == 0, first.stderr
    again = run_tempi(["--model", "mock/mock-model", "--continue", "-p", "and again"], cwd=work, env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout == "continued\n"
    files = list((home / "sessions").rglob("*.jsonl"))
    assert len(files) == 1
    session_id = json.loads(files[0].read_text().split("\n")[0])["id"]

    listing = run_tempi(["sessions", "list"], cwd=work, env=env)
    assert listing.returncode == 0, listing.stderr
    header, row = listing.stdout.splitlines()[:2]
    assert header.split() == ["ID", "NAME", "CWD", "UPDATED", "MSGS", "STATUS"]
    assert row.startswith(session_id[:8]) and row.split()[-1] in ("idle", "running") and " 6 " in row

    shown = run_tempi(["sessions", "show", session_id[:6]], cwd=work, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "> make a.txt" in shown.stdout and "Created <b>." in shown.stdout and "> and again" in shown.stdout

    out = tmp_path / "s.html"
    exported = run_tempi(["sessions", "export", session_id[:6], "--html", str(out)], cwd=work, env=env)
    assert exported.returncode == 0, exported.stderr
    page = out.read_text()
    assert "Created &lt;b&gt;." in page
    assert re.search(
        r'<details class="tool ok"><summary><span class="tool-name">write</span> <code class="call">a\.txt</code>',
        page,
    )
