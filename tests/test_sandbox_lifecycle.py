"""Sandbox containers: found again after a worker restart, destroyed with their scratch
volumes, orphans swept; and what a sandbox may not do."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import pytest

from tempi.activities.sandbox import (
    SESSION_LABEL,
    SandboxError,
    SandboxSpec,
    SandboxUnavailableError,
    create_sandbox,
    destroy_sandbox,
    find_sandbox,
    open_backend,
    remove_orphans,
    sandbox_task_queue,
)
from tempi.activities.tools import ToolContext, ToolOutcome, execute_tool
from tests.docker_support import (  # noqa: F401 (fixtures)
    Sandbox,
    SandboxFactory,
    docker_client,
    sandbox_image,
    sandboxes,
)


def _text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


async def _bash(sandbox: Sandbox, command: str) -> ToolOutcome:
    return await execute_tool(
        "bash", {"command": command}, ToolContext(cwd="/workspace", backend=sandbox.backend)
    )


def _container(client: Any, sandbox: Sandbox) -> Any:
    return client.containers.get(sandbox.info.container_id)


async def test_a_restarted_worker_finds_the_same_container_with_its_scratch_files(
    sandboxes: SandboxFactory,  # noqa: F811
    sandbox_image: str,  # noqa: F811
):
    sandbox = await sandboxes.create()
    assert sandbox.info.task_queue == sandbox_task_queue(sandboxes.client)
    # /tmp is the container's own volume: a new container would not have this file.
    await _bash(sandbox, "echo kept > state.txt; echo scratch > /tmp/scratch.txt")

    # A new worker process: its own engine connection, nothing but the session id.
    fresh_client = docker.from_env()
    try:
        found = await find_sandbox(sandbox.info.session_id, client=fresh_client)
        assert found == sandbox.info
        backend = await open_backend(found.container_id, client=fresh_client)
        assert await backend.read_bytes("/workspace/state.txt") == b"kept\n"
        assert await backend.read_bytes("/tmp/scratch.txt") == b"scratch\n"
        # A retried create returns the sandbox it already made.
        spec = SandboxSpec(image=sandbox_image, workspace=str(sandbox.host_workspace))
        again = await create_sandbox(spec, sandbox.info.session_id, client=fresh_client)
        assert again.container_id == sandbox.info.container_id
    finally:
        fresh_client.close()
    assert await find_sandbox("no-such-session", client=sandboxes.client) is None


async def test_a_stopped_sandbox_is_started_again_with_its_workspace(
    sandboxes: SandboxFactory,  # noqa: F811
):
    sandbox = await sandboxes.create()
    await sandbox.backend.write_bytes("/workspace/notes.txt", b"before the stop\n")
    _container(sandboxes.client, sandbox).stop(timeout=1)
    with pytest.raises(SandboxUnavailableError, match="not running"):
        await sandbox.backend.run(["true"])

    found = await find_sandbox(sandbox.info.session_id, client=sandboxes.client)
    assert found is not None and found.container_id == sandbox.info.container_id
    outcome = await _bash(sandbox, "cat notes.txt")
    assert _text(outcome) == "before the stop\n"


async def test_destroy_removes_the_container_and_its_scratch_volumes(
    sandboxes: SandboxFactory,  # noqa: F811
):
    sandbox = await sandboxes.create()
    mounts = _container(sandboxes.client, sandbox).attrs["Mounts"]
    scratch = [mount["Name"] for mount in mounts if mount["Type"] == "volume"]
    assert {mount["Destination"] for mount in mounts} >= {"/workspace", "/tmp"} and scratch

    assert await destroy_sandbox(sandbox.info.session_id, client=sandboxes.client)
    assert await find_sandbox(sandbox.info.session_id, client=sandboxes.client) is None
    for name in scratch:
        with pytest.raises(docker.errors.NotFound):
            sandboxes.client.volumes.get(name)
    assert not await destroy_sandbox(sandbox.info.session_id, client=sandboxes.client)
    with pytest.raises(SandboxUnavailableError, match="no longer exists"):
        await sandbox.backend.stat("/workspace")
    gone = await _bash(sandbox, "echo hi")
    assert gone.is_error and "no longer exists" in _text(gone)
    with pytest.raises(SandboxUnavailableError):
        await open_backend(sandbox.info.container_id, client=sandboxes.client)


async def test_orphans_are_removed_and_live_sandboxes_kept(sandboxes: SandboxFactory):  # noqa: F811
    live = await sandboxes.create()
    orphan = await sandboxes.create()
    labelled = sandboxes.client.containers.list(all=True, filters={"label": SESSION_LABEL})
    # Everything else on this engine stays alive, other test runs' sandboxes included.
    keep = {container.labels[SESSION_LABEL] for container in labelled} - {orphan.info.session_id}

    removed = await remove_orphans(keep, client=sandboxes.client)
    assert removed == [orphan.info.session_id]
    assert await find_sandbox(orphan.info.session_id, client=sandboxes.client) is None
    assert await find_sandbox(live.info.session_id, client=sandboxes.client) == live.info


async def test_bad_specs_and_missing_images_are_clear_errors(sandboxes: SandboxFactory):  # noqa: F811
    for bad in ({"user": "0:0"}, {"user": "sandbox"}, {"memory": "lots"}, {"workspace": "../x"}):
        with pytest.raises(ValueError):
            SandboxSpec.model_validate({"workspace": "/tmp/ws", **bad})
    with pytest.raises(SandboxError, match="does not exist"):
        await create_sandbox(
            SandboxSpec(image="tempi-no-such-image:1", workspace="/tmp"),
            f"bad-{uuid.uuid4().hex}",
            client=sandboxes.client,
        )
    with pytest.raises(SandboxError, match="Cannot start"):
        await create_sandbox(
            SandboxSpec(image=sandboxes.image, workspace="/nonexistent/tempi-ws"),
            f"bad-{uuid.uuid4().hex}",
            client=sandboxes.client,
        )


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on every interface of this machine, accepting connections."""
    server = socket.create_server(("0.0.0.0", 0))
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def _connect_probe(host: str, port: int) -> str:
    return f"python3 -c 'import socket; socket.create_connection((\"{host}\", {port}), timeout=3)'"


async def test_no_network_unless_the_spec_allows_it(sandboxes: SandboxFactory, listener: int):  # noqa: F811
    connected = await sandboxes.create(network=True)
    gateway = _container(sandboxes.client, connected).attrs["NetworkSettings"]["Gateway"]
    # The control: with network, the container reaches this machine's port...
    reached = await _bash(connected, _connect_probe(gateway, listener))
    assert not reached.is_error, _text(reached)

    isolated = await sandboxes.create()
    # ...without, the same connection fails, and no name resolves.
    blocked = await _bash(isolated, _connect_probe(gateway, listener))
    assert blocked.is_error and "Network is unreachable" in _text(blocked)
    lookup = await _bash(isolated, "getent hosts deb.debian.org")
    assert lookup.is_error


async def test_non_root_read_only_root_and_limits(sandboxes: SandboxFactory):  # noqa: F811
    sandbox = await sandboxes.create(memory="256m", pids=64)
    assert _text(await _bash(sandbox, "id -u")).strip() == "1000"
    etc = await _bash(sandbox, "echo x > /etc/tempi-probe")
    assert etc.is_error and "Read-only file system" in _text(etc)
    writable = await _bash(sandbox, "echo ok > /tmp/a && echo ok > ~/b && cat /tmp/a ~/b")
    assert _text(writable) == "ok\nok\n"

    hog = await _bash(sandbox, "python3 -c 'x = bytearray(600 << 20); print(len(x))'")
    assert hog.is_error and "code 137" in _text(hog)  # killed by the memory limit
    bomb = await _bash(sandbox, "for i in $(seq 100); do sleep 2 & done")
    assert "fork: retry: Resource temporarily unavailable" in _text(bomb)  # stopped by the pids limit
    # Killing everything the tools' user may signal leaves the container running.
    await _bash(sandbox, "kill -9 -1")
    assert _text(await _bash(sandbox, "echo still here")) == "still here\n"
