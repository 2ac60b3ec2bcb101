"""Upgrading workers under running sessions: a session started on build A stays on A while
build B is rolled out and made current, and moves to B at its next continue-as-new."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType, VersioningBehavior
from temporalio.client import Client, WorkflowHandle

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.dev_server import temporal_binary
from tests.conftest import start_tempi_worker, write_models_json
from tests.session_harness import assert_single_chain, scripted_model, start_session, unique_queue

pytestmark = pytest.mark.slow


def make_current(address: str, deployment: str, build: str, timeout: float = 30) -> None:
    """The documented upgrade step (docs/operations.md), retried until the new build's worker
    has polled and the server knows the version."""
    args = [
        temporal_binary(), "worker", "deployment", "set-current-version",
        "--address", address, "--deployment-name", deployment, "--build-id", build, "--yes",
    ]  # fmt: skip
    deadline = time.monotonic() + timeout
    while True:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=30)
        if proc.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"could not make {build} current: {proc.stderr or proc.stdout}")
        time.sleep(0.5)


async def next_pinned_run(handle: WorkflowHandle, after: str | None, timeout: float = 20) -> tuple[str, str]:
    """The session's latest run other than `after` and the build it is pinned to, once it has
    continued as new and the new run's first task has run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = (await handle.describe()).raw_description.workflow_execution_info
        pinned = info.versioning_info.behavior == VersioningBehavior.VERSIONING_BEHAVIOR_PINNED
        if info.execution.run_id != after and pinned:
            return info.execution.run_id, info.versioning_info.deployment_version.build_id
        await asyncio.sleep(0.2)
    raise AssertionError("the session did not continue as new onto a pinned run")


async def running_on(client: Client, deployment: str, build: str, expect: int) -> int:
    """docs/operations.md's count of running workflows on a build, read until it shows
    `expect` or 5 s pass (visibility trails history a little)."""
    query = f'TemporalWorkerDeploymentVersion="{deployment}:{build}" AND ExecutionStatus="Running"'
    deadline = time.monotonic() + 5
    while True:
        count = (await client.count_workflows(query)).count
        if count == expect or time.monotonic() > deadline:
            return count
        await asyncio.sleep(0.25)


async def who_ran(client: Client, workflow_id: str, run_id: str) -> tuple[set[str], set[str]]:
    """The builds that completed a run's workflow tasks, and the worker identities (pid@host)
    that ran its tasks and activities."""
    builds: set[str] = set()
    workers: set[str] = set()
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            attrs = event.workflow_task_completed_event_attributes
            builds.add(attrs.deployment_version.build_id)
            workers.add(attrs.identity)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            workers.add(event.activity_task_started_event_attributes.identity)
    return builds, workers


async def test_a_session_moves_to_the_new_build_at_continue_as_new(
    tmp_path: Path, temporal_address: str, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "versioned-upgrade"
    scripted_server.add_scenario(
        scenario, {"select": "sequential", "turns": [{"text": f"answer {i}"} for i in range(3)]}
    )
    home = tmp_path / "home"
    write_models_json(home, scripted_server, scenario)
    queue = unique_queue()
    deployment = f"tempi-test-{uuid.uuid4().hex[:8]}"
    workers: dict[str, subprocess.Popen[bytes]] = {}

    def start_worker(build: str) -> str:
        proc = start_tempi_worker(
            home,
            temporal_address,
            queue,
            tmp_path / f"worker-{build}.log",
            TEMPI_DEPLOYMENT_NAME=deployment,
            TEMPI_BUILD_ID=build,
        )
        workers[build] = proc
        return f"{proc.pid}@"

    try:
        worker_a = start_worker("build-a")
        await asyncio.to_thread(make_current, temporal_address, deployment, "build-a")
        # A budget of ten events: the session continues as new after every prompt.
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, scenario),
            task_queue=queue,
            history_event_budget=10,
        )
        first = (await s.handle.describe()).run_id
        await s.prompt("question 0")
        await s.run_to_idle()
        # The run waiting for the next prompt started on A (A was current) and is pinned there.
        second, build = await next_pinned_run(s.handle, after=first)
        assert build == "build-a"

        worker_b = start_worker("build-b")
        await asyncio.to_thread(make_current, temporal_address, deployment, "build-b")
        # B is current, yet the pinned run answers this prompt on A, then continues as new on B.
        await s.prompt("question 1")
        await s.run_to_idle()
        _third, build = await next_pinned_run(s.handle, after=second)
        assert build == "build-b"
        await s.prompt("question 2")
        await s.run_to_idle()
        runs = [w async for w in temporal_client.list_workflows(f'WorkflowId = "{s.handle.id}"')]
        # The documented check before retiring a build: no running workflow left on it.
        assert await running_on(temporal_client, deployment, "build-a", expect=0) == 0
        assert await running_on(temporal_client, deployment, "build-b", expect=1) == 1
    finally:
        for proc in workers.values():
            proc.kill()
            proc.wait()

    assert f"as build build-b of deployment {deployment}" in (tmp_path / "worker-build-b.log").read_text()
    runs.sort(key=lambda r: r.start_time)
    ran = [await who_ran(temporal_client, s.handle.id, r.run_id) for r in runs]
    # Run 0 answered question 0, run 1 question 1 (on A, with B current), run 2 question 2.
    assert [builds for builds, _ in ran[:3]] == [{"build-a"}, {"build-a"}, {"build-b"}]
    assert all(identity.startswith(worker_a) for identity in ran[1][1]), ran[1][1]
    assert all(identity.startswith(worker_b) for identity in ran[2][1]), ran[2][1]

    answers = [
        e["message"]["content"][0]["text"]
        for e in s.events
        if e["type"] == "message_end" and e["message"]["role"] == "assistant"
    ]
    assert answers == ["answer 0", "answer 1", "answer 2"]
    entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()]
    assert_single_chain(entries)
    roles = [e["message"]["role"] for e in entries if e["type"] == "message"]
    assert roles == ["user", "assistant"] * 3
