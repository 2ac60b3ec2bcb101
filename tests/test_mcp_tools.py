"""MCP servers as tool sources: real servers written with the `mcp` package (one over stdio,
started by the worker, one over streamable HTTP, started here), a real `tempi -p` whose
scripted model calls their tools, and `tempi mcp list`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tempi.cli.errors import UserError
from tempi.cli.mcp_command import cmd_mcp
from tempi.config.project_trust import trust_project
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows.session_types import workflow_id_for
from tests.conftest import run_tempi, start_tempi_worker, tempi_env, trust_project_as, write_models_json
from tests.history_payloads import payload_texts
from tests.session_harness import scripted_model, start_session, unique_queue

DEMO_SERVER = Path(__file__).parent / "mcp_servers" / "demo_server.py"
SECRET = "s3cr3t-mcp-value-7f2c"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    """The demo server over streamable HTTP, named `web`; yields its URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(DEMO_SERVER), "--http", str(port), "--name", "web"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the HTTP MCP server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(10)


def _servers(url: str) -> dict[str, Any]:
    return {
        "local": {
            "command": sys.executable,
            "args": [str(DEMO_SERVER), "--name", "local"],
            # A literal secret, and a reference the worker resolves from its environment.
            "env": {"DEMO_SECRET": SECRET, "DEMO_SECRET_EXPECTED": "${MCP_TEST_SECRET}"},
        },
        "web": {"url": url, "headers": {"Authorization": "Bearer ${MCP_TEST_SECRET}"}},
    }


def _write_mcp_json(config_dir: Path, servers: dict[str, Any]) -> None:
    """The owner's mcp.json (a secret may be named only there, not in a repository's)."""
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


def _setup(
    tmp_path: Path, server: ScriptedLLMServer, scenario: str, turns: list[dict[str, Any]], url: str
) -> tuple[Path, Path, dict[str, str]]:
    server.add_scenario(scenario, turns)
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir(parents=True)
    write_models_json(home, server, scenario)
    _write_mcp_json(home, _servers(url))
    return home, work, tempi_env(home, None, MCP_TEST_SECRET=SECRET)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _session_entries(home: Path) -> list[dict[str, Any]]:
    files = list((home / "sessions").rglob("*.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


def _tool_results(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Tool results by call id."""
    return {
        e["message"]["toolCallId"]: e["message"]
        for e in entries
        if e["type"] == "message" and e["message"]["role"] == "toolResult"
    }


def _text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["content"])


def _request_tool_results(body: dict[str, Any]) -> list[str]:
    return [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in body["messages"]
        if m["role"] == "tool"
    ]


@pytest.mark.slow
async def test_model_calls_tools_of_a_stdio_and_an_http_server(
    tmp_path: Path,
    temporal_address: str,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    http_server: str,
) -> None:
    turns = [
        {
            "tool_calls": [
                {**_call("mcp__local__lookup", key="tea"), "id": "c-local"},
                {**_call("mcp__web__lookup", key="milk"), "id": "c-web"},
                {**_call("mcp__local__picture"), "id": "c-pic"},
            ]
        },
        {"text": "All looked up."},
    ]
    home, work, env = _setup(tmp_path, scripted_server, "mcp-calls", turns, http_server)
    env["TEMPORAL_ADDRESS"] = temporal_address
    env["TEMPI_CLIENT_WORKER"] = "1"
    proc = run_tempi(["--model", "mock/mock-model", "-p", "look things up"], cwd=work, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "All looked up.\n"

    first, second = scripted_server.requests_for("mcp-calls")
    offered = {t["function"]["name"]: t["function"] for t in first.body["tools"]}
    assert offered["mcp__local__lookup"]["parameters"]["required"] == ["key"]
    assert {"mcp__web__lookup", "mcp__web__record", "mcp__local__picture", "read", "bash"} <= set(offered)
    sent_back = "\n".join(_request_tool_results(second.body))
    assert "local says tea means TEA; secret ok" in sent_back
    assert "web says milk means MILK" in sent_back

    results = _tool_results(_session_entries(home))
    assert _text(results["c-local"]) == "local says tea means TEA; secret ok"
    assert _text(results["c-web"]).startswith("web says milk means MILK")
    assert not results["c-web"]["isError"]
    picture = results["c-pic"]["content"]
    assert [b["type"] for b in picture] == ["text", "image"] and picture[1]["mimeType"] == "image/png"

    # The secret reached the server (it said "secret ok") but not the workflow's history.
    session_id = _session_entries(home)[0]["id"]
    handle = temporal_client.get_workflow_handle(workflow_id_for(session_id))
    history = json.dumps(payload_texts((await handle.fetch_history()).to_json_dict()))
    assert "mcp__local__lookup" in history and "local says tea means TEA" in history
    assert SECRET not in history


@pytest.mark.slow
def test_a_server_killed_mid_session_is_a_tool_error_and_the_run_goes_on(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, http_server: str
) -> None:
    turns = [
        {
            "tool_calls": [
                {**_call("mcp__local__whoami"), "id": "pid1"},
                {**_call("mcp__web__whoami"), "id": "w1"},
            ]
        },
        {
            "tool_calls": [
                {**_call("mcp__local__crash"), "id": "crash1"},
                {**_call("mcp__web__crash"), "id": "crash2"},
            ]
        },
        {
            "tool_calls": [
                {**_call("mcp__local__whoami"), "id": "pid2"},
                {**_call("mcp__web__lookup", key="x"), "id": "w2"},
            ]
        },
        {"text": "Carried on."},
    ]
    home, work, env = _setup(tmp_path, scripted_server, "mcp-kill", turns, http_server)
    env["TEMPORAL_ADDRESS"] = temporal_address
    env["TEMPI_CLIENT_WORKER"] = "1"
    proc = run_tempi(["--model", "mock/mock-model", "-p", "use the servers"], cwd=work, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Carried on.\n"

    results = _tool_results(_session_entries(home))
    # A tool that is not read-only whose server died during the call is not run again.
    for crashed in ("crash1", "crash2"):
        assert results[crashed]["isError"]
        assert "may or may not have run" in _text(results[crashed]), results[crashed]
    # The stdio server is started again by the worker; the HTTP one is gone for good.
    assert not results["pid2"]["isError"] and _text(results["pid2"]) != _text(results["pid1"])
    assert results["w2"]["isError"]
    assert "MCP server 'web' is not available" in _text(results["w2"])


async def test_mcp_list_shows_servers_their_state_and_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], http_server: str
) -> None:
    work = tmp_path / "project"
    work.mkdir()
    _write_mcp_json(
        tmp_path / "home",
        {
            **_servers(http_server),
            "down": {"url": "http://127.0.0.1:9/mcp"},
            "needs": {"command": "true", "env": {"KEY": "${MCP_TEST_UNSET}"}},
        },
    )
    monkeypatch.setenv("TEMPI_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MCP_TEST_SECRET", SECRET)
    monkeypatch.chdir(work)
    monkeypatch.delenv("MCP_TEST_UNSET", raising=False)
    code = await cmd_mcp(["list"])
    out = capsys.readouterr().out
    assert code == 1  # a server is down
    assert "local  (stdio: " in out and "web  (http: " in out
    assert out.count("state: connected, 7 tools") == 2
    assert "  mcp__local__lookup [read-only]  Look a word up in the server's table." in out
    assert "  mcp__web__record  Append a line to the server's log file." in out
    assert "down  (http: http://127.0.0.1:9/mcp" in out and "state: error:" in out
    assert "uses ${MCP_TEST_UNSET}, which is not set in this terminal's environment" in out
    assert SECRET not in out


async def test_a_bad_mcp_json_names_the_file_and_the_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEMPI_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    config = tmp_path / ".tempi" / "mcp.json"
    config.parent.mkdir()
    cases = {
        '{"mcpServers": {"x": {"command": "a", "url": "http://b"}}}': "give either `command`",
        '{"mcpServers": {"x": {"command": "a", "argz": []}}}': "argz",
        '{"servers": {}}': 'no "mcpServers"',
        '{"mcpServers": {"x": ': "is not valid JSON",
        '{"mcpServers": {"a b": {"command": "a"}}}': "may hold only letters",
    }
    for text, problem in cases.items():
        config.write_text(text)
        trust_project(tmp_path)  # an untrusted project's file is left out, broken or not
        with pytest.raises(UserError) as err:
            await cmd_mcp(["list"])
        assert str(config) in str(err.value) and problem in str(err.value), err.value


def test_a_run_with_a_bad_mcp_json_stops_before_starting_and_names_the_file(
    tmp_path: Path, scripted_server: ScriptedLLMServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    (work / ".tempi").mkdir(parents=True)
    write_models_json(home, scripted_server, "mcp-bad")
    (work / ".tempi" / "mcp.json").write_text('{"mcpServers": {"docs": {"args": ["x"]}}}')
    proc = run_tempi(
        ["--model", "mock/mock-model", "--trust", "-p", "hi"], cwd=work, env=tempi_env(home, None)
    )
    assert proc.returncode == 1
    assert str(work / ".tempi" / "mcp.json") in proc.stderr and "server 'docs'" in proc.stderr
    assert "give either `command`" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
async def test_after_a_lost_worker_a_read_only_tool_runs_again_and_a_changing_one_does_not(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "mcp-worker-lost"
    scripted_server.add_scenario(
        scenario,
        [
            {
                "tool_calls": [
                    {**_call("mcp__local__slow_lookup", key="a"), "id": "look"},
                    {**_call("mcp__local__slow_record", line="b"), "id": "rec"},
                ]
            },
            {"text": "Both answered."},
        ],
    )
    home, work = tmp_path / "home", tmp_path / "work"
    write_models_json(home, scripted_server, scenario)
    calls, gate = tmp_path / "calls.log", tmp_path / "gate"
    (work / ".tempi").mkdir(parents=True)
    (work / ".tempi" / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "local": {
                        "command": sys.executable,
                        "args": [str(DEMO_SERVER)],
                        "env": {"DEMO_LOG": str(calls), "DEMO_GATE": str(gate)},
                    }
                }
            }
        )
    )
    trust_project_as(home, work)
    queue = unique_queue()
    worker_log = tmp_path / "worker.log"
    worker = start_tempi_worker(home, temporal_address, queue, worker_log)
    try:
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, scenario), task_queue=queue, mcp=True
        )
        # The worker subprocess may take long to start on a busy machine; the prompt waits for it.
        await s.prompt("Look a up and record b.", timeout=120)
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
    results = _tool_results(entries)
    assert not results["look"]["isError"] and _text(results["look"]) == "finished lookup a"
    assert results["rec"]["isError"] and "may or may not have run" in _text(results["rec"])
    final = [e for e in s.events if e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == "Both answered."
