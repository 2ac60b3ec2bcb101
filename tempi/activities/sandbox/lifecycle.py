"""Sandbox containers: create one per session, find it again, destroy it, sweep orphans.

A sandbox is a long-lived container (`sleep infinity` under an init that reaps zombies)
labelled with its session, so a restarted worker finds it again and containers whose
session is gone can be removed. Tools run as a non-root user; the main process runs as
root so that user cannot stop the container, but nothing has any capabilities. The root
filesystem is read-only, memory, CPU and processes are limited, and there is no network
unless asked. The writable places are the workspace at /workspace (a host directory or a named
volume) and anonymous volumes at /tmp and the image's home directory; those are volumes
rather than tmpfs because the archive API, which the tools use for files, cannot see
into tmpfs mounts.

The functions block on the Docker engine in worker threads; they are plain async
functions for activities to wrap.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Collection
from functools import cache
from typing import Any

import docker
import docker.errors
from docker.types import Mount
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tempi.activities.sandbox.docker_backend import USER_LABEL, DockerBackend
from tempi.activities.sandbox.errors import SandboxError, SandboxUnavailableError
from tempi.activities.sandbox.workspace import WORKSPACE_DIR, record_workspace_base

DEFAULT_IMAGE = "tempi-sandbox:latest"
SESSION_LABEL = "tempi.session"
TMP_DIR = "/tmp"

_VOLUME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_MEMORY = re.compile(r"^[1-9][0-9]*[bkmg]?$", re.IGNORECASE)
_USER = re.compile(r"^[0-9]+:[0-9]+$")


class SandboxSpec(BaseModel):
    """How to make a sandbox container."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: str = DEFAULT_IMAGE
    # An absolute path is a host directory to bind-mount; anything else names a volume.
    workspace: str
    network: bool = False
    memory: str = "2g"  # also the limit with swap: no swapping
    cpus: float = Field(default=2.0, gt=0)
    pids: int = Field(default=512, gt=0)
    user: str = "1000:1000"  # uid:gid the tools run as; never root
    labels: dict[str, str] = Field(default_factory=dict)  # extra labels, e.g. the parent session

    @field_validator("workspace")
    @classmethod
    def _workspace(cls, value: str) -> str:
        if not value.startswith("/") and not _VOLUME_NAME.match(value):
            raise ValueError("workspace must be an absolute host path or a Docker volume name")
        return value

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str) -> str:
        if not _MEMORY.match(value):
            raise ValueError('memory must be a size such as "512m" or "2g"')
        return value

    @field_validator("user")
    @classmethod
    def _user(cls, value: str) -> str:
        if not _USER.match(value):
            raise ValueError('user must be numeric "uid:gid"')
        if value.split(":")[0] == "0":
            raise ValueError("the sandbox user must not be root (uid 0)")
        return value


class SandboxInfo(BaseModel):
    """Where a session's sandbox lives; tool activities for it go to `task_queue`."""

    session_id: str
    container_id: str
    host: str
    task_queue: str


@cache
def default_client() -> Any:
    """The Docker engine named by the environment (DOCKER_HOST, or the local socket)."""
    try:
        return docker.from_env()
    except docker.errors.DockerException as error:
        raise SandboxUnavailableError(f"No Docker engine can be reached: {error}") from None


def _client(client: Any | None) -> Any:
    return client if client is not None else default_client()


@cache
def _engine_name(client: Any) -> str:
    return str(client.info()["Name"])


def sandbox_task_queue(client: Any | None = None) -> str:
    """The task queue of the host whose Docker engine this process talks to. Workers that
    can run sandboxes poll it; a sandbox's tool activities are scheduled on it."""
    return f"sandbox-{_engine_name(_client(client))}"


def _container_name(session_id: str) -> str:
    """Unique per session, so a retried create finds the first attempt's container."""
    readable = re.sub(r"[^A-Za-z0-9_.-]", "-", session_id)[:40]
    digest = hashlib.sha256(session_id.encode()).hexdigest()[:10]
    return f"tempi-{readable}-{digest}"


def _info(client: Any, session_id: str, container: Any) -> SandboxInfo:
    host = _engine_name(client)
    return SandboxInfo(
        session_id=session_id, container_id=container.id, host=host, task_queue=f"sandbox-{host}"
    )


def _home_dir(client: Any, image: str) -> str | None:
    try:
        env = client.images.get(image).attrs["Config"].get("Env") or []
    except docker.errors.ImageNotFound:
        raise SandboxError(
            f"The sandbox image {image} does not exist on this Docker engine; "
            "build it with deploy/sandbox/ci-setup.sh (see deploy/sandbox/README.md)"
        ) from None
    home = next((item[len("HOME=") :] for item in env if item.startswith("HOME=")), "")
    if home in ("", "/") or home.startswith((WORKSPACE_DIR, TMP_DIR)):
        return None
    return home


def _mounts(client: Any, spec: SandboxSpec) -> list[Any]:
    workspace_type = "bind" if spec.workspace.startswith("/") else "volume"
    mounts = [
        Mount(WORKSPACE_DIR, spec.workspace, type=workspace_type),
        Mount(TMP_DIR, None, type="volume"),  # anonymous: removed with the container
    ]
    home = _home_dir(client, spec.image)
    if home is not None:
        mounts.append(Mount(home, None, type="volume"))
    return mounts


def _find(client: Any, session_id: str) -> Any | None:
    containers = client.containers.list(all=True, filters={"label": f"{SESSION_LABEL}={session_id}"})
    usable = [c for c in containers if c.status not in ("dead", "removing")]
    if not usable:
        return None
    container = usable[0]
    try:
        if container.status == "paused":
            container.unpause()
        elif container.status != "running":
            container.start()  # e.g. after the engine restarted
    except docker.errors.APIError as error:
        raise SandboxUnavailableError(
            f"The sandbox of session {session_id} is {container.status} and cannot be started again: "
            f"{error.explanation}"
        ) from None
    container.reload()
    return container


def _run(client: Any, spec: SandboxSpec, session_id: str) -> Any:
    existing = _find(client, session_id)
    if existing is not None:
        return existing
    try:
        return client.containers.run(
            spec.image,
            ["sleep", "infinity"],
            name=_container_name(session_id),
            detach=True,
            init=True,
            # The main process runs as root, with no capabilities (cap_drop), so the
            # sandbox user cannot signal it; everything else runs as spec.user.
            user="0:0",
            labels={**spec.labels, SESSION_LABEL: session_id, USER_LABEL: spec.user},
            network_mode=None if spec.network else "none",
            mem_limit=spec.memory,
            memswap_limit=spec.memory,
            nano_cpus=int(spec.cpus * 1_000_000_000),
            pids_limit=spec.pids,
            read_only=True,
            mounts=_mounts(client, spec),
            working_dir=WORKSPACE_DIR,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            restart_policy={"Name": "unless-stopped"},
        )
    except docker.errors.APIError as error:
        if error.status_code == 409:  # a concurrent attempt made it first
            found = _find(client, session_id)
            if found is not None:
                return found
        raise SandboxError(f"Cannot start a sandbox for session {session_id}: {error.explanation}") from None


def _remove(container: Any) -> None:
    try:
        container.remove(force=True, v=True)  # v: its anonymous volumes too
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as error:
        if "already in progress" not in str(error.explanation):
            raise


async def create_sandbox(spec: SandboxSpec, session_id: str, *, client: Any | None = None) -> SandboxInfo:
    """Start the session's sandbox, or return the one it already has (so a retry is safe),
    and record the workspace's starting state for `workspace_patch`."""
    client = _client(client)
    container = await asyncio.to_thread(_run, client, spec, session_id)
    try:
        await record_workspace_base(DockerBackend(container))
    except SandboxError:
        await asyncio.to_thread(_remove, container)
        raise
    return await asyncio.to_thread(_info, client, session_id, container)


async def find_sandbox(session_id: str, *, client: Any | None = None) -> SandboxInfo | None:
    """The session's sandbox (started again if it was stopped), or None if it has none."""
    client = _client(client)
    container = await asyncio.to_thread(_find, client, session_id)
    if container is None:
        return None
    return await asyncio.to_thread(_info, client, session_id, container)


async def open_backend(container_id: str, *, client: Any | None = None) -> DockerBackend:
    """The execution backend for a running sandbox container."""
    client = _client(client)
    try:
        container = await asyncio.to_thread(client.containers.get, container_id)
    except docker.errors.NotFound:
        raise SandboxUnavailableError(f"The sandbox container {container_id[:12]} no longer exists") from None
    if container.status != "running":
        raise SandboxUnavailableError(f"The sandbox container {container_id[:12]} is {container.status}")
    return DockerBackend(container)


def _destroy(client: Any, session_id: str) -> bool:
    containers = client.containers.list(all=True, filters={"label": f"{SESSION_LABEL}={session_id}"})
    for container in containers:
        _remove(container)
    return bool(containers)


async def destroy_sandbox(session_id: str, *, client: Any | None = None) -> bool:
    """Remove the session's sandbox and its scratch volumes (a named workspace volume is
    kept). False if there was none."""
    return await asyncio.to_thread(_destroy, _client(client), session_id)


def _remove_orphans(client: Any, live: set[str]) -> list[str]:
    removed: set[str] = set()
    for container in client.containers.list(all=True, filters={"label": SESSION_LABEL}):
        session_id = container.labels.get(SESSION_LABEL, "")
        if session_id not in live:
            _remove(container)
            removed.add(session_id)
    return sorted(removed)


async def remove_orphans(live_session_ids: Collection[str], *, client: Any | None = None) -> list[str]:
    """Remove every sandbox whose session is not among `live_session_ids`; returns the
    sessions whose sandboxes were removed."""
    return await asyncio.to_thread(_remove_orphans, _client(client), set(live_session_ids))
