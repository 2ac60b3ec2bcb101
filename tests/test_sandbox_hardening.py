"""Docker sandboxes on a shared engine and over a long session: a sweep removes only its
own installation's orphans; background jobs end with the tool call that started them;
idle sandboxes stop and start again on the next call; limits come from the owner's
settings and are sized to the host by default."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tempi.activities.sandbox import (
    SESSION_LABEL,
    SandboxSpec,
    create_sandbox,
    open_backend,
    remove_orphans,
)
from tempi.activities.sandbox_activities import SandboxActivities
from tempi.activities.tools import ToolContext, ToolOutcome, execute_tool
from tempi.workflows.activity_payloads import SandboxCreateInput
from tests.docker_support import (  # noqa: F401 (fixtures)
    Sandbox,
    SandboxFactory,
    docker_client,
    open_host_dir,
    remove_session_containers,
    sandbox_image,
    sandboxes,
)


def _text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


async def _bash(backend: Any, command: str, timeout: float | None = None) -> ToolOutcome:
    arguments: dict[str, Any] = {"command": command}
    if timeout is not None:
        arguments["timeout"] = timeout
    return await execute_tool("bash", arguments, ToolContext(cwd="/workspace", backend=backend))


def _use_home(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """Become another tempi installation: each home has its own id."""
    monkeypatch.setenv("TEMPI_HOME", str(home))


async def test_a_sweep_never_removes_another_installations_live_sandbox(
    sandboxes: SandboxFactory,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
):
    # Installation A runs a session on the shared engine; its Temporal server knows it.
    _use_home(monkeypatch, tmp_path / "home-a")
    theirs = await sandboxes.create()
    await _bash(theirs.backend, "echo work in progress > notes.txt")

    # Installation B starts a worker: its own Temporal server lists only B's live session.
    _use_home(monkeypatch, tmp_path / "home-b")
    mine_live = await sandboxes.create()
    mine_orphan = await sandboxes.create()
    # Sandboxes of other test runs on this engine stay out of it (and alive).
    others = {
        container.labels[SESSION_LABEL]
        for container in sandboxes.client.containers.list(all=True, filters={"label": SESSION_LABEL})
    } - {theirs.info.session_id, mine_live.info.session_id, mine_orphan.info.session_id}

    removed = await remove_orphans({mine_live.info.session_id, *others}, client=sandboxes.client)

    assert removed == [mine_orphan.info.session_id]  # B's own orphan goes
    assert sandboxes.client.containers.get(theirs.info.container_id).status == "running"
    outcome = await _bash(theirs.backend, "cat notes.txt")
    assert not outcome.is_error and _text(outcome) == "work in progress\n"
    assert sandboxes.client.containers.get(mine_live.info.container_id).status == "running"

    # A's own sweep, with A's live session, leaves B's live sandbox alone too.
    _use_home(monkeypatch, tmp_path / "home-a")
    assert await remove_orphans({theirs.info.session_id, *others}, client=sandboxes.client) == []
    assert sandboxes.client.containers.get(mine_live.info.container_id).status == "running"


async def test_background_jobs_die_with_their_call_and_do_not_use_up_the_pids_limit(
    sandboxes: SandboxFactory,  # noqa: F811
):
    sandbox = await sandboxes.create(pids=512)
    # 4 x 150 = 600 sleeps, more than the container's 512 processes, over several calls.
    for _ in range(4):
        started = await _bash(
            sandbox.backend, "for i in $(seq 150); do sleep 1000 & done; echo started", timeout=60
        )
        assert not started.is_error and _text(started) == "started\n", _text(started)
    left = await _bash(sandbox.backend, "ls -d /proc/[0-9]* | wc -l; echo still works")
    assert not left.is_error, _text(left)
    count, works = _text(left).splitlines()
    assert works == "still works"
    assert int(count) < 20  # init, the watchdog and this call: no leftover sleeps


@pytest.mark.slow
async def test_a_call_that_fills_the_pids_limit_does_not_break_the_next_call(
    sandboxes: SandboxFactory,  # noqa: F811
):
    sandbox = await sandboxes.create(pids=64)
    await _bash(
        sandbox.backend, "for i in $(seq 80); do sleep 1000 & done 2>/dev/null; echo done", timeout=30
    )
    after = await _bash(sandbox.backend, "echo still works")
    assert not after.is_error and _text(after) == "still works\n", _text(after)


async def _wait_for_status(client: Any, container_id: str, status: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if client.containers.get(container_id).status == status:
            return True
        await asyncio.sleep(0.5)
    return False


@pytest.mark.slow
async def test_an_idle_sandbox_stops_and_the_next_call_starts_it_with_its_workspace(
    sandboxes: SandboxFactory,  # noqa: F811
):
    sandbox = await sandboxes.create(idle_stop_seconds=3)
    # A call longer than the idle time keeps the sandbox up.
    busy = await _bash(sandbox.backend, "sleep 6; echo worked > notes.txt; echo done", timeout=30)
    assert not busy.is_error and _text(busy) == "done\n", _text(busy)
    await sandbox.backend.write_bytes("/tmp/scratch.txt", b"scratch\n")

    assert await _wait_for_status(sandboxes.client, sandbox.info.container_id, "exited", 30)
    # The next tool call of the session opens the same container again.
    backend = await open_backend(sandbox.info.container_id, client=sandboxes.client)
    outcome = await _bash(backend, "cat notes.txt /tmp/scratch.txt")
    assert not outcome.is_error and _text(outcome) == "worked\nscratch\n", _text(outcome)


async def _created_limits(
    client: Any, image: str, workspace: Path, monkeypatch: pytest.MonkeyPatch, home: Path
) -> dict[str, Any]:
    """Make a sandbox through the activity, as a worker with this home does; its limits."""
    _use_home(monkeypatch, home)
    session_id = f"test-{uuid.uuid4().hex[:12]}"
    try:
        created = await SandboxActivities().create(
            SandboxCreateInput(
                session_id=session_id,
                session_path=str(workspace / "s.jsonl"),
                image=image,
                workspace=str(workspace),
            )
        )
        host_config: dict[str, Any] = client.containers.get(created.container_id).attrs["HostConfig"]
        return host_config
    finally:
        remove_session_containers(client, session_id)


async def test_limits_come_from_the_owners_settings_and_default_to_a_share_of_the_host(
    docker_client: Any,  # noqa: F811
    sandbox_image: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
):
    workspace = open_host_dir(tmp_path / "ws")
    info = docker_client.info()

    default = await _created_limits(docker_client, sandbox_image, workspace, monkeypatch, tmp_path / "plain")
    # Half the CPUs (at least one), a quarter of the memory: never the whole machine.
    assert default["NanoCpus"] == int(max(1.0, info["NCPU"] / 2) * 1e9)
    assert default["NanoCpus"] < info["NCPU"] * 1e9 or info["NCPU"] == 1
    assert default["Memory"] == max(512 << 20, info["MemTotal"] // 4)
    assert default["MemorySwap"] == default["Memory"]

    configured = tmp_path / "configured"
    configured.mkdir()
    (configured / "settings.json").write_text(
        json.dumps({"dockerSandbox": {"memory": "300m", "cpus": 0.5, "pids": 100, "idleStopSeconds": 60}})
    )
    # A project's own settings cannot raise its sandbox's limits.
    (workspace / ".tempi").mkdir()
    (workspace / ".tempi" / "settings.json").write_text(json.dumps({"dockerSandbox": {"memory": "8g"}}))
    chosen = await _created_limits(docker_client, sandbox_image, workspace, monkeypatch, configured)
    assert (chosen["Memory"], chosen["NanoCpus"], chosen["PidsLimit"]) == (300 << 20, 500_000_000, 100)
    # The engine does not restart a sandbox by itself: an idle stop lasts until the next call.
    assert chosen["RestartPolicy"]["Name"] in ("", "no")


async def test_a_bad_limits_setting_is_a_clear_error(
    docker_client: Any,  # noqa: F811
    sandbox_image: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
):
    from tempi.activities.sandbox import SandboxError

    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"dockerSandbox": {"memory": "lots"}}))
    with pytest.raises(SandboxError, match=r"dockerSandbox.*memory"):
        await _created_limits(docker_client, sandbox_image, open_host_dir(tmp_path / "ws"), monkeypatch, home)


async def test_create_sandbox_labels_its_installation(
    sandboxes: SandboxFactory,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
):
    from tempi.activities.sandbox import INSTALLATION_LABEL, installation_id

    _use_home(monkeypatch, tmp_path / "home")
    sandbox: Sandbox = await sandboxes.create()
    labels = sandboxes.client.containers.get(sandbox.info.container_id).labels
    assert labels[INSTALLATION_LABEL] == installation_id() == installation_id(tmp_path / "home")
    assert (tmp_path / "home" / "installation-id").stat().st_mode & 0o077 == 0
    # A retried create in the same installation finds the same container.
    spec = SandboxSpec(image=sandboxes.image, workspace=str(sandbox.host_workspace))
    again = await create_sandbox(spec, sandbox.info.session_id, client=sandboxes.client)
    assert again.container_id == sandbox.info.container_id
