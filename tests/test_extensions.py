"""Python extensions through a real `tempi -p` against the dev server and the scripted
model: discovered from the project's .tempi/extensions/ or given with --extension, their
hooks run inside the tool activities, their tools beside the builtin ones."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, start_tempi_worker, tempi_env, trust_project_as, write_models_json
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue
from tests.test_rpc_mode import RpcProcess

EXTENSIONS = Path(__file__).parent / "extensions"
DEMO_MCP_SERVER = Path(__file__).parent / "mcp_servers" / "demo_server.py"


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def _project(
    tmp_path: Path, server: ScriptedLLMServer, scenario: str, turns: list[dict[str, Any]]
) -> tuple[Path, Path]:
    server.add_scenario(scenario, turns)
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir(parents=True)
    write_models_json(home, server, scenario)
    return home, work


def _install(home: Path, work: Path, name: str) -> Path:
    """The extension in the project's .tempi/extensions/, the project trusted as it is now."""
    target = work / ".tempi" / "extensions" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXTENSIONS / name, target)
    trust_project_as(home, work)
    return target


def _entries(home: Path) -> list[dict[str, Any]]:
    files = list((home / "sessions").rglob("*.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


def _results(home: Path) -> dict[str, dict[str, Any]]:
    return {
        e["message"]["toolCallId"]: e["message"]
        for e in _entries(home)
        if e["type"] == "message" and e["message"]["role"] == "toolResult"
    }


def _text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"])


def test_a_project_extension_blocks_rm_rf_rewrites_results_and_adds_to_the_prompt(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-guard"
    turns = [
        {
            "tool_calls": [
                _call("rm", "bash", command="rm -rf victim"),
                _call("rd", "read", path="notes.txt"),
                _call("echo", "bash", command="echo original"),
                _call("boom", "bash", command="touch boom-ran"),
            ]
        },
        {"text": "Guarded."},
    ]
    home, work = _project(tmp_path, scripted_server, scenario, turns)
    (work / "victim").mkdir()
    (work / "victim" / "keep.txt").write_text("precious")
    (work / "notes.txt").write_text("line one\n")
    _install(home, work, "guard.py")
    proc = run_tempi(
        ["--model", "mock/mock-model", "-p", "clean up"], cwd=work, env=tempi_env(home, temporal_address)
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Guarded.\n"
    assert (work / "victim" / "keep.txt").read_text() == "precious"

    results = _results(home)
    assert results["rm"]["isError"]
    assert _text(results["rm"]) == "rm -rf is not allowed here (guard extension)"
    assert _text(results["rd"]).startswith("[checked by guard in project]\n")
    assert "line one" in _text(results["rd"])
    assert "rewritten-by-guard" in _text(results["echo"])
    # A hook that raises blocks the call, with the error as the reason.
    assert results["boom"]["isError"] and not (work / "boom-ran").exists()
    assert "tool_call hook failed: ValueError: the guard broke" in _text(results["boom"])

    first, second = scripted_server.requests_for(scenario)
    assert "Guard rule: never delete files ('clean up')." in json.dumps(first.body)
    sent_back = json.dumps(second.body)
    assert "rm -rf is not allowed here (guard extension)" in sent_back
    assert "[checked by guard in project]" in sent_back
    # The session records which extensions it used: paths, never code.
    header_and_config = json.dumps(_entries(home)[:3])
    assert "def extension" not in header_and_config


def test_extension_tools_run_beside_the_builtins_and_broken_extensions_are_reported(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-tools"
    turns = [
        {"tool_calls": [_call("s", "shout", text="hi", times=2)]},
        {"tool_calls": [_call("gone", "self_destruct")]},
        {"tool_calls": [_call("after", "bash", command="echo still here > after.txt")]},
        {"text": "Done."},
    ]
    home, work = _project(tmp_path, scripted_server, scenario, turns)
    _install(home, work, "broken.py")
    guard = tmp_path / "elsewhere" / "guard.py"
    guard.parent.mkdir()
    shutil.copy(EXTENSIONS / "guard.py", guard)
    proc = run_tempi(
        ["--model", "mock/mock-model", "--extension", str(guard), "-p", "shout"],
        cwd=work,
        env=tempi_env(home, temporal_address),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Done.\n"
    assert "its extension() raised RuntimeError: broken on purpose" in proc.stderr
    assert "the session goes on without it" in proc.stderr and "Traceback" not in proc.stderr

    first = scripted_server.requests_for(scenario)[0]
    offered = {t["function"]["name"]: t["function"] for t in first.body["tools"]}
    assert {"shout", "self_destruct", "bash", "read"} <= set(offered)
    assert offered["shout"]["parameters"]["required"] == ["text"]

    results = _results(home)
    assert _text(results["s"]) == "HI HI" and not results["s"]["isError"]
    assert _text(results["gone"]) == "gone"
    # The extension's file is gone, so the worker cannot load it: the call is not run.
    assert results["after"]["isError"] and not (work / "after.txt").exists()
    assert "could not load an extension the session uses" in _text(results["after"])
    assert "does not exist on this machine" in _text(results["after"])


def test_no_extensions_turns_discovery_off(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-off"
    turns = [{"tool_calls": [_call("rm", "bash", command="rm -rf victim")]}, {"text": "Removed."}]
    home, work = _project(tmp_path, scripted_server, scenario, turns)
    (work / "victim").mkdir()
    _install(home, work, "guard.py")
    proc = run_tempi(
        ["--model", "mock/mock-model", "--no-extensions", "-p", "clean up"],
        cwd=work,
        env=tempi_env(home, temporal_address),
    )
    assert proc.returncode == 0, proc.stderr
    assert not (work / "victim").exists()
    first = scripted_server.requests_for(scenario)[0]
    assert "shout" not in {t["function"]["name"] for t in first.body["tools"]}
    assert "Guard rule" not in json.dumps(first.body)


@pytest.mark.slow
def test_extension_state_in_custom_entries_outlives_the_worker_and_messages_steer_the_run(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-memory"
    turns = [
        {"tool_calls": [_call("c1", "count")]},
        {"tool_calls": [_call("n1", "nudge", text="steered by the extension")]},
        {"text": "First run done."},
        {"tool_calls": [_call("c2", "count")]},
        {"text": "Second run done."},
    ]
    home, work = _project(tmp_path, scripted_server, scenario, turns)
    _install(home, work, "memory.py")
    env = tempi_env(home, temporal_address)
    first = run_tempi(["--model", "mock/mock-model", "-p", "count"], cwd=work, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "First run done.\n"
    # A new process, so a new worker: the count comes back from the session file.
    second = run_tempi(["--model", "mock/mock-model", "-c", "-p", "count again"], cwd=work, env=env)
    assert second.returncode == 0, second.stderr
    assert second.stdout == "Second run done.\n"

    results = _results(home)
    assert _text(results["c1"]) == "count is 1" and _text(results["c2"]) == "count is 2"
    custom = [e for e in _entries(home) if e["type"] == "custom"]
    assert [(e["customType"], e["data"]) for e in custom] == [("counter", {"n": 1}), ("counter", {"n": 2})]

    # The steering message reached the model with the tool result, as the user's.
    requests = scripted_server.requests_for(scenario)
    users = [m for m in requests[2].body["messages"] if m["role"] == "user"]
    assert "steered by the extension" in json.dumps(users[-1])


def test_an_extension_command_makes_the_prompt_of_tempi_p_and_rpc_lists_and_runs_it(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-command"
    home, work = _project(
        tmp_path, scripted_server, scenario, [{"text": "Hello, Bob."}, {"text": "Hello, Ann."}]
    )
    _install(home, work, "memory.py")
    env = tempi_env(home, temporal_address)
    done = run_tempi(["--model", "mock/mock-model", "-p", "/greet Bob"], cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello, Bob.\n"
    sent = json.dumps(scripted_server.requests_for(scenario)[0].body["messages"][-1])
    assert "Say hello to Bob." in sent and "/greet" not in sent

    rpc = RpcProcess(["--model", "mock/mock-model", "--no-session"], cwd=work, env=env)
    try:
        commands = rpc.call({"id": "c", "type": "get_commands"}, timeout=90)["data"]["commands"]
        greet = next(c for c in commands if c["name"] == "greet")
        assert greet["source"] == "extension" and greet["description"] == "Ask the model to greet someone"
        assert greet["path"] == str(work / ".tempi" / "extensions" / "memory.py")
        assert rpc.call({"id": "p", "type": "prompt", "message": "/greet Ann"})["success"] is True
        rpc.event("agent_end")
        sent = json.dumps(scripted_server.requests_for(scenario)[-1].body["messages"][-1])
        assert "Say hello to Ann." in sent
    finally:
        rpc.close()


@pytest.mark.slow
async def test_after_a_lost_worker_a_read_tool_runs_again_and_a_write_tool_does_not(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-worker-lost"
    scripted_server.add_scenario(
        scenario,
        [
            {"tool_calls": [_call("look", "slow_lookup", key="a"), _call("rec", "slow_record", key="b")]},
            {"text": "Both answered."},
        ],
    )
    home = tmp_path / "home"
    write_models_json(home, scripted_server, scenario)
    ext_dir = tmp_path / "ext"
    ext_dir.mkdir()
    shutil.copy(EXTENSIONS / "slow.py", ext_dir / "slow.py")
    calls, gate = tmp_path / "calls.log", tmp_path / "gate"
    (ext_dir / "calls.path").write_text(str(calls))
    (ext_dir / "gate.path").write_text(str(gate))
    queue = unique_queue()
    worker_log = tmp_path / "worker.log"
    worker = start_tempi_worker(home, temporal_address, queue, worker_log)
    try:
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, scenario),
            task_queue=queue,
            extensions=[str(ext_dir / "slow.py")],
        )
        await s.prompt("Look a up and record b.", timeout=120)  # the worker may still be starting
        deadline = time.monotonic() + 60
        while not (calls.exists() and len(calls.read_text().splitlines()) == 2):
            assert time.monotonic() < deadline, "the tools were not called"
            await asyncio.sleep(0.05)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        gate.touch()
        worker = start_tempi_worker(home, temporal_address, queue, worker_log)
        await s.run_to_idle(timeout=120)
    finally:
        worker.kill()
        worker.wait()

    assert sorted(calls.read_text().splitlines()) == ["lookup a", "lookup a", "record b"]
    entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()]
    results = {
        e["message"]["toolCallId"]: e["message"]
        for e in entries
        if e["type"] == "message" and e["message"]["role"] == "toolResult"
    }
    assert not results["look"]["isError"] and _text(results["look"]) == "finished lookup a"
    assert results["rec"]["isError"] and "may or may not have run" in _text(results["rec"])


def test_extension_hooks_see_mcp_tool_calls_too(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-mcp"
    turns = [
        {
            "tool_calls": [
                _call("rec", "mcp__local__record", line="x"),
                _call("look", "mcp__local__lookup", key="tea"),
            ]
        },
        {"text": "Looked."},
    ]
    home, work = _project(tmp_path, scripted_server, scenario, turns)
    _install(home, work, "guard.py")
    log = tmp_path / "mcp.log"
    server = {
        "command": sys.executable,
        "args": [str(DEMO_MCP_SERVER), "--name", "local"],
        "env": {"DEMO_LOG": str(log)},
    }
    (work / ".tempi" / "mcp.json").write_text(json.dumps({"mcpServers": {"local": server}}))
    trust_project_as(home, work)
    proc = run_tempi(
        ["--model", "mock/mock-model", "-p", "go"], cwd=work, env=tempi_env(home, temporal_address)
    )
    assert proc.returncode == 0, proc.stderr
    results = _results(home)
    assert results["rec"]["isError"] and _text(results["rec"]) == "the guard keeps the MCP log read-only"
    assert not log.exists()
    assert _text(results["look"]).startswith("local says tea-checked means TEA-CHECKED")


def test_the_example_extension_refuses_rm_rf_and_counts_refusals_in_the_session(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-example"
    turns = [
        {"tool_calls": [_call("rm", "bash", command="rm -rf victim")]},
        {"tool_calls": [_call("n", "refusals")]},
        {"text": "One refusal."},
    ]
    home, work = _project(tmp_path, scripted_server, scenario, turns)
    (work / "victim").mkdir()
    example = Path(__file__).parent.parent / "examples" / "extensions" / "guard.py"
    proc = run_tempi(
        ["--model", "mock/mock-model", "--extension", str(example), "-p", "/refusals"],
        cwd=work,
        env=tempi_env(home, temporal_address),
    )
    assert proc.returncode == 0, proc.stderr
    assert (work / "victim").is_dir()
    results = _results(home)
    assert "rm -rf is not allowed in this project" in _text(results["rm"])
    assert _text(results["n"]) == "The guard refused 1 command(s) in this session."
    first = scripted_server.requests_for(scenario)[0]
    assert "Call the refusals tool" in json.dumps(first.body["messages"][-1])
    assert "Never run `rm -rf`" in json.dumps(first.body)


async def test_a_worker_that_cannot_load_an_extension_reports_it_and_the_session_goes_on(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-worker-problem"
    scripted_server.add_scenario(
        scenario, [{"tool_calls": [_call("rm", "bash", command="rm -rf victim")]}, {"text": "Still here."}]
    )
    broken, guard = tmp_path / "ext" / "broken.py", tmp_path / "ext" / "guard.py"
    broken.parent.mkdir()
    shutil.copy(EXTENSIONS / "broken.py", broken)
    shutil.copy(EXTENSIONS / "guard.py", guard)
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, scenario),
            task_queue=queue,
            extensions=[str(broken), str(guard)],
        )
        (Path(s.config.cwd) / "victim").mkdir()
        await s.prompt("clean up")
        events = await s.run_to_idle()
    problems = [e for e in events if e["type"] == "extension_error"]
    assert [(p["extensionPath"], p["event"]) for p in problems] == [(str(broken), "load")]
    assert "broken on purpose" in problems[0]["error"]
    # The extension that loaded still guards the session.
    assert (Path(s.config.cwd) / "victim").is_dir()
    final = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == "Still here."


async def test_lifecycle_and_context_handlers_run_and_a_failing_one_is_reported(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-lifecycle"
    scripted_server.add_scenario(scenario, [{"text": "One."}, {"text": "Two."}])
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, scenario),
            task_queue=queue,
            extensions=[str(EXTENSIONS / "lifecycle.py")],
        )
        await s.prompt("first")
        await s.run_to_idle()
        await s.prompt("second")
        await s.run_to_idle()
    problems = [e for e in s.events if e["type"] == "extension_error"]
    assert [p["event"] for p in problems] == ["session_start"] and "ZeroDivisionError" in problems[0]["error"]
    entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()]
    noted = [e["data"]["event"] for e in entries if e["type"] == "custom"]
    assert noted == ["session_start", "agent_start", "agent_start"]
    # The context handler left the model only the second prompt; the file keeps both.
    second = scripted_server.requests_for(scenario)[1].body["messages"]
    users = [json.dumps(m["content"]) for m in second if m["role"] == "user"]
    assert len(users) == 1 and "second" in users[0]
    assert sum(1 for e in entries if e["type"] == "message" and e["message"]["role"] == "user") == 2
