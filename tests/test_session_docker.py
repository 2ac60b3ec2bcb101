"""Sessions in docker sandboxes: tools run in the session's container through the host's
task queue, a subagent works on its own copy and hands back a patch, and containers go
away with their sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from temporalio.client import Client

from tempi.activities.sandbox import SESSION_LABEL
from tempi.agent.model_spec import ModelSpec
from tempi.agent.subagents import AgentDefinition
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.docker_support import docker_client, open_host_dir, sandbox_image  # noqa: F401 (fixtures)
from tests.session_harness import Session, running_worker, scripted_model, start_session, unique_queue


def _containers(client: Any, session_id: str) -> list[Any]:
    return client.containers.list(all=True, filters={"label": f"{SESSION_LABEL}={session_id}"})


async def _start_docker_session(
    client: Client, tmp: Path, model: ModelSpec, queue: str, image: str, **config: Any
) -> Session:
    """A session whose tools run in a container, its cwd open to the container's user."""
    s = await start_session(
        client, tmp, model, task_queue=queue, sandbox="docker", sandbox_image=image, **config
    )
    open_host_dir(Path(s.config.cwd))
    return s


async def test_tools_run_in_the_sessions_container_and_shutdown_removes_it(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    docker_client: Any,  # noqa: F811
    sandbox_image: str,  # noqa: F811
) -> None:
    scripted_server.add_scenario(
        "docker-tools",
        [
            {
                "tool_calls": [
                    {"name": "write", "arguments": {"path": "hello.txt", "content": "from the sandbox\n"}}
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "bash",
                        "arguments": {
                            "command": "id -u; pwd; cat hello.txt; (echo x > /etc/x) 2>&1 | head -1"
                        },
                    },
                ]
            },
            {"text": "done"},
        ],
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue, host_sandboxes=True):
        s = await _start_docker_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "docker-tools"),
            queue,
            sandbox_image,
        )
        await s.prompt("work in the sandbox")
        events = await s.run_to_idle(timeout=90)
        assert len(_containers(docker_client, s.config.session_id)) == 1
        await s.session.shutdown()
        await s.handle.result()
    outputs = {
        e["toolName"]: e["result"]["content"][0]["text"] for e in events if e["type"] == "tool_execution_end"
    }
    assert outputs["bash"].splitlines()[:3] == ["1000", "/workspace", "from the sandbox"]
    assert "Read-only file system" in outputs["bash"]
    assert (Path(s.config.cwd) / "hello.txt").read_text() == "from the sandbox\n"  # the bind-mounted cwd
    assert _containers(docker_client, s.config.session_id) == []


async def test_subagent_in_docker_works_on_a_copy_and_returns_a_patch(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    docker_client: Any,  # noqa: F811
    sandbox_image: str,  # noqa: F811
) -> None:
    scripted_server.add_scenario(
        "docker-parent",
        [
            {"tool_calls": [{"name": "task", "arguments": {"agent": "coder", "task": "add a file"}}]},
            {"text": "reviewed"},
        ],
    )
    scripted_server.add_scenario(
        "docker-child",
        [
            {
                "tool_calls": [
                    {"name": "write", "arguments": {"path": "added.py", "content": "print('added')\n"}}
                ]
            },
            {"text": "added added.py"},
        ],
    )
    coder = AgentDefinition(name="coder", model=scripted_model(scripted_server, "docker-child"))
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue, host_sandboxes=True):
        s = await _start_docker_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "docker-parent"),
            queue,
            sandbox_image,
            tools=["read", "write", "bash", "task"],
            agents=[coder],
        )
        cwd = Path(s.config.cwd)
        (cwd / "existing.txt").write_text("kept\n")
        await s.prompt("delegate")
        events = await s.run_to_idle(timeout=120)
        await s.session.shutdown()
    task_end = next(e for e in events if e["type"] == "tool_execution_end" and e["toolName"] == "task")
    assert not task_end["isError"], task_end
    result = task_end["result"]["details"]["results"][0]
    assert "added.py" in result["patch"] and "+print('added')" in result["patch"]
    assert "existing.txt" not in result["patch"]  # only what the child changed
    assert not (cwd / "added.py").exists()  # the parent decides whether to apply it
    assert "added.py" in task_end["result"]["content"][0]["text"]
    assert _containers(docker_client, result["sessionId"]) == []
    assert (
        json.loads(Path(result["sessionFile"]).read_text().splitlines()[0])["parentSession"]
        == s.config.session_path
    )


async def test_orphan_sweep_removes_containers_of_sessions_that_are_gone(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    docker_client: Any,  # noqa: F811
    sandbox_image: str,  # noqa: F811
) -> None:
    from tempi.activities.sandbox import SandboxSpec, create_sandbox
    from tempi.workers.orphans import sweep_orphan_sandboxes

    scripted_server.add_scenario(
        "docker-live", [{"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]}, {"text": "ok"}]
    )
    orphan_id = f"gone-{tmp_path.name}"
    await create_sandbox(
        SandboxSpec(image=sandbox_image, workspace=str(open_host_dir(tmp_path / "orphan"))), orphan_id
    )
    assert orphan_id in await sweep_orphan_sandboxes(temporal_client)
    assert _containers(docker_client, orphan_id) == []
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue, host_sandboxes=True):
        s = await _start_docker_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "docker-live"),
            queue,
            sandbox_image,
        )
        await s.prompt("use the sandbox")
        await s.run_to_idle(timeout=60)
        assert s.config.session_id not in await sweep_orphan_sandboxes(temporal_client)
        assert len(_containers(docker_client, s.config.session_id)) == 1  # a live session keeps its sandbox
        await s.session.shutdown()
        await s.handle.result()


async def test_a_gone_sandbox_host_gives_a_clear_error_and_a_fresh_sandbox_carries_on(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    docker_client: Any,  # noqa: F811
    sandbox_image: str,  # noqa: F811
) -> None:
    scripted_server.add_scenario(
        "docker-host-gone",
        [
            {"tool_calls": [{"name": "write", "arguments": {"path": "kept.txt", "content": "saved work\n"}}]},
            {"text": "written"},
            {"tool_calls": [{"name": "bash", "arguments": {"command": "cat kept.txt"}}]},
            {"text": "the host was gone"},
            {"tool_calls": [{"name": "bash", "arguments": {"command": "cat kept.txt"}}]},
            {"text": "back in a fresh sandbox"},
        ],
    )
    queue = unique_queue()
    sessions = tmp_path / "sessions"
    async with running_worker(temporal_client, sessions, queue, host_sandboxes=True):
        s = await _start_docker_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "docker-host-gone"),
            queue,
            sandbox_image,
            sandbox_pickup_s=3,
        )
        await s.prompt("write it")
        await s.run_to_idle(timeout=90)
        (first_container,) = _containers(docker_client, s.config.session_id)
    # The sandbox host is gone, its worker and container with it; only a worker for the
    # session itself is left.
    first_container.remove(force=True)
    async with running_worker(temporal_client, sessions, queue):
        await s.prompt("read it")
        gone = await s.run_to_idle(timeout=60)
    async with running_worker(temporal_client, sessions, queue, host_sandboxes=True):
        await s.prompt("read it again")
        back = await s.run_to_idle(timeout=90)
        containers = _containers(docker_client, s.config.session_id)
        await s.session.shutdown()
        await s.handle.result()
    (lost,) = [e for e in gone if e["type"] == "tool_execution_end"]
    assert lost["isError"] and "did not pick this up within 3 s" in lost["result"]["content"][0]["text"]
    assert [e for e in gone if e["type"] == "message_end"][-1]["message"]["content"][0]["text"] == (
        "the host was gone"
    )
    (read,) = [e for e in back if e["type"] == "tool_execution_end"]
    assert not read["isError"] and read["result"]["content"][0]["text"] == "saved work\n"
    assert len(containers) == 1 and containers[0].id != first_container.id
