"""`--sandbox docker` lands only on workers that can create sandboxes: the creation is asked
for on its own queue, which only workers reaching a Docker engine poll. A worker without an
engine never takes it (it used to, and failed it, or made the container where no worker ran
its tools); with no engine worker at all the tool says so and names the queue."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.worker import build_worker
from tempi.workflows.session_types import sandbox_creation_queue
from tests.session_harness import fixed_credentials, scripted_model, start_session, unique_queue


async def test_a_worker_without_a_docker_engine_never_creates_sandboxes(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "no-engine",
        [
            {"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "echo hi"}}]},
            {"text": "no sandbox"},
        ],
    )
    queue = unique_queue()
    # The main queue's worker as `tempi worker` builds it where no Docker engine answers.
    worker: Worker = build_worker(
        temporal_client, task_queue=queue, sessions_root=tmp_path / "sessions", credentials=fixed_credentials
    )
    async with worker:
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "no-engine"),
            task_queue=queue,
            sandbox="docker",
            sandbox_pickup_s=2,
        )
        await s.prompt("run it")
        events = await s.run_to_idle(timeout=60)
    (ended,) = [e for e in events if e["type"] == "tool_execution_end"]
    text = ended["result"]["content"][0]["text"]
    assert ended["isError"]
    assert "no worker that can create sandboxes took the request within 2 s" in text, text
    assert sandbox_creation_queue(queue) in text
    assert [e for e in events if e["type"] == "message_end"][-1]["message"]["content"][0][
        "text"
    ] == "no sandbox"
