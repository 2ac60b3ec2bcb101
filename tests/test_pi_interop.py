"""pi 0.73.1 itself works with tempi: it continues a session tempi wrote, tempi lists and
continues the sessions pi keeps in its own directory, and pi's own RpcClient drives
`tempi --mode rpc`.

Needs pi from npm, found through PI_BIN or PATH (`.ci/run` installs it and sets PI_BIN);
set TEMPI_REQUIRE_PI=1 to make its absence a failure instead of a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.pi_bin import pi_bin

# A slow end-to-end group: see tests/conftest.py.
pytestmark = pytest.mark.slow

RPC_DRIVER = Path(__file__).parent / "pi_rpc" / "drive_tempi.mjs"


def test_pi_continues_a_session_tempi_wrote(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    pi = pi_bin()
    scripted_server.add_scenario(
        "interop-tempi",
        [
            {
                "tool_calls": [
                    {"name": "write", "arguments": {"path": "hello.py", "content": "print('hi')\n"}}
                ]
            },
            {"tool_calls": [{"name": "bash", "arguments": {"command": "python3 hello.py"}}]},
            {"text": "hello.py prints hi."},
        ],
    )
    scripted_server.add_scenario(
        "interop-pi", {"select": "sequential", "turns": [{"text": "pi read tempi's session."}]}
    )
    home, pi_dir, work = tmp_path / "home", tmp_path / "pi-agent", tmp_path / "work"
    work.mkdir()
    write_models_json(home, scripted_server, "interop-tempi")
    write_models_json(pi_dir, scripted_server, "interop-pi")
    env = tempi_env(home, temporal_address)

    made = run_tempi(
        ["--model", "mock/mock-model", "--session-dir", str(tmp_path / "sessions"), "-p", "Write hello.py"],
        cwd=work,
        env=env,
    )
    assert made.returncode == 0, made.stderr
    (session_file,) = (tmp_path / "sessions").glob("*.jsonl")
    written = session_file.read_text().splitlines()

    pi_env = {**env, "PI_CODING_AGENT_DIR": str(pi_dir), "PI_OFFLINE": "1"}
    proc = subprocess.run(
        [
            pi,
            "--session",
            str(session_file),
            "--provider",
            "mock",
            "--model",
            "mock-model",
            "-p",
            "What did you do?",
        ],
        cwd=work,
        env=pi_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "pi read tempi's session."

    # pi sent the model tempi's whole conversation, tool calls and results included.
    (request,) = scripted_server.requests_for("interop-pi")
    messages = request.body["messages"]
    roles = [m["role"] for m in messages if m["role"] != "system"]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant", "user"]
    sent = json.dumps(messages)
    assert "Write hello.py" in sent and "hello.py prints hi." in sent and "python3 hello.py" in sent
    bash_result = [m for m in messages if m["role"] == "tool"][-1]
    assert "hi" in json.dumps(bash_result["content"])

    # pi appended to tempi's file without touching it, continuing from tempi's leaf.
    after = session_file.read_text().splitlines()
    assert after[: len(written)] == written
    added = [json.loads(line) for line in after[len(written) :]]
    assert [e["message"]["role"] for e in added if e["type"] == "message"] == ["user", "assistant"]
    leaf = json.loads(written[-1])["id"]
    first_message = next(e for e in added if e["type"] == "message")
    parents = {e["id"]: e["parentId"] for e in added}
    parent = first_message["parentId"]
    while parent in parents:  # pi may add settings entries (model, thinking) first
        parent = parents[parent]
    assert parent == leaf


def test_pis_rpc_client_drives_tempi(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    pi = pi_bin()
    pi_package = Path(os.path.realpath(pi)).parent.parent  # .bin/pi -> <package>/dist/cli.js
    scripted_server.add_scenario(
        "interop-rpc",
        [
            {
                "tool_calls": [
                    {"name": "write", "arguments": {"path": "notes.txt", "content": "from tempi\n"}}
                ]
            },
            {"text": "notes.txt is written."},
        ],
    )
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    write_models_json(home, scripted_server, "interop-rpc")
    env = tempi_env(home, temporal_address, TEMPI_PYTHON=sys.executable)
    export = tmp_path / "session.html"
    proc = subprocess.run(
        ["node", str(RPC_DRIVER), str(pi_package), str(export)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)

    assert got["eventTypes"][0] == "agent_start" and got["eventTypes"][-1] == "agent_end"
    assert got["eventTypes"].count("turn_start") == 2 and "tool_execution_end" in got["eventTypes"]
    roles = ["user", "assistant", "toolResult", "assistant"]
    assert got["agentEndMessages"] == roles and got["messages"] == roles
    assert got["lastText"] == "notes.txt is written."
    assert (work / "notes.txt").read_text() == "from tempi\n"
    state = got["state"]
    assert state["isStreaming"] is False and state["sessionName"] == "interop run"
    assert state["model"]["provider"] == "mock" and state["model"]["id"] == "mock-model"
    assert Path(state["sessionFile"]).exists() and state["messageCount"] == 4
    assert got["stats"]["toolCalls"] == 1 and got["stats"]["totalMessages"] == 4
    assert got["bash"]["output"] == "from tempi\n" and got["bash"]["exitCode"] == 0
    assert got["forkMessages"] == ["Create notes.txt"]
    assert "mock/mock-model" in got["models"]
    assert Path(got["export"]["path"]) == export and "notes.txt is written." in export.read_text()
    unknown = got["unknownCommand"]
    assert unknown["success"] is False and "no_such_command" in unknown["error"]


def test_tempi_lists_and_continues_sessions_pi_wrote_in_its_own_directory(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    pi = pi_bin()
    scripted_server.add_scenario("cross-pi", [{"text": "pi here."}])
    scripted_server.add_scenario(
        "cross-tempi",
        {"select": "sequential", "turns": [{"text": "tempi continues."}, {"text": "a new one."}]},
    )
    home, pi_dir, work = tmp_path / "home", tmp_path / "pi-agent", tmp_path / "work"
    work.mkdir()
    write_models_json(home, scripted_server, "cross-tempi")
    write_models_json(pi_dir, scripted_server, "cross-pi")
    env = tempi_env(home, temporal_address, PI_CODING_AGENT_DIR=str(pi_dir))
    pi_env = {**env, "PI_OFFLINE": "1"}

    # pi keeps the session in its own directory for this cwd, as it always does.
    proc = subprocess.run(
        [pi, "--provider", "mock", "--model", "mock-model", "-p", "Hello from pi"],
        cwd=work, env=pi_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (pis,) = (pi_dir / "sessions").glob("*/*.jsonl")
    pi_id = json.loads(pis.read_text().splitlines()[0])["id"]

    def listed() -> list[str]:
        done = run_tempi(["sessions", "list", "--here", "--no-status", "--json"], cwd=work, env=env)
        assert done.returncode == 0, done.stderr
        return [json.loads(line)["path"] for line in done.stdout.splitlines()]

    assert listed() == [str(pis)]

    # --continue finds pi's session (the only one here) and appends to pi's file in place.
    done = run_tempi(["--model", "mock/mock-model", "--continue", "-p", "Go on"], cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "tempi continues."
    (request,) = scripted_server.requests_for("cross-tempi")
    assert "Hello from pi" in json.dumps(request.body["messages"])
    roles = [json.loads(line).get("message", {}).get("role") for line in pis.read_text().splitlines()]
    assert [r for r in roles if r] == ["user", "assistant", "user", "assistant"]

    # A new tempi session goes to tempi's directory; the list holds both, newest first.
    done = run_tempi(["--model", "mock/mock-model", "-p", "Something else"], cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    (tempis,) = (home / "sessions").glob("*/*.jsonl")
    assert listed() == [str(tempis), str(pis)]

    # pi goes on with its own session (by id, as pi finds it); it is the newest again.
    proc = subprocess.run(
        [pi, "--provider", "mock", "--model", "mock-model", "--session", pi_id[:8], "-p", "Back to pi"],
        cwd=work, env=pi_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert listed() == [str(pis), str(tempis)]
