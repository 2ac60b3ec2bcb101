"""An extension's tool acts on the session's files, in the session's sandbox: a relative path
is the session's (not the worker's directory, another project's), and a command it runs is
sandboxed as the session's bash is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.docker_support import docker_client, open_host_dir, sandbox_image  # noqa: F401 (fixtures)
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue

EXTENSION = Path(__file__).parent / "extensions" / "workspace_tools.py"


def _calls(*calls: tuple[str, dict[str, str]]) -> list[dict[str, object]]:
    return [
        {
            "tool_calls": [
                {"id": f"c{i}", "name": name, "arguments": args} for i, (name, args) in enumerate(calls)
            ]
        },
        {"text": "done"},
    ]


@pytest.mark.parametrize("sandbox", ["local", "bwrap"])
async def test_extension_tools_read_the_sessions_files_and_run_in_its_sandbox(
    sandbox: str,
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = f"ext-context-{sandbox}"
    outside = tmp_path / "elsewhere" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text("not the session's\n")
    scripted_server.add_scenario(
        scenario, _calls(("word_count", {"path": "notes.txt"}), ("where", {"path": str(outside)}))
    )
    # The worker's own directory holds a notes.txt of another project.
    worker_dir = tmp_path / "other-project"
    worker_dir.mkdir()
    (worker_dir / "notes.txt").write_text("one two\n")
    monkeypatch.chdir(worker_dir)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.txt").write_text("the session's own notes file\n")
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, scenario),
            task_queue=queue,
            extensions=[str(EXTENSION)],
            sandbox=sandbox,
        )
        await s.prompt("count and look")
        await s.run_to_idle(timeout=60)
    results = {
        m["tool_call_id"]: m["content"]
        for m in scripted_server.requests_for(scenario)[1].body["messages"]
        if m["role"] == "tool"
    }
    assert results["c0"] == "notes.txt has 5 words", results
    where = results["c1"]
    assert f"sandbox {sandbox}: {tmp_path / 'work'}" in where, where
    # A file outside the workspace is there for a local command, not for a sandboxed one.
    assert ("sees-it" if sandbox == "local" else "hidden") in where, json.dumps(results)


@pytest.mark.slow
async def test_an_extension_tool_of_a_docker_session_acts_in_its_container(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    docker_client: object,  # noqa: F811
    sandbox_image: str,  # noqa: F811
) -> None:
    scenario = "ext-context-docker"
    scripted_server.add_scenario(
        scenario, _calls(("word_count", {"path": "notes.txt"}), ("where", {"path": "/.dockerenv"}))
    )
    work = open_host_dir(tmp_path / "work")
    (work / "notes.txt").write_text("three words here\n")
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue, host_sandboxes=True):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, scenario),
            task_queue=queue,
            extensions=[str(EXTENSION)],
            sandbox="docker",
            sandbox_image=sandbox_image,
        )
        await s.prompt("count and look")
        await s.run_to_idle(timeout=120)
        await s.session.shutdown()
        await s.handle.result()
    results = {
        m["tool_call_id"]: m["content"]
        for m in scripted_server.requests_for(scenario)[1].body["messages"]
        if m["role"] == "tool"
    }
    assert results["c0"] == "notes.txt has 3 words", results
    assert "sandbox docker: /workspace\nsees-it (exit 0)" in results["c1"], results
