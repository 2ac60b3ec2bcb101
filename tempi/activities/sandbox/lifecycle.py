"""Sandbox containers: create one per session, find it again, destroy it, sweep orphans.

A sandbox is a long-lived container (an idle watchdog under an init that reaps zombies)
labelled with its session and with the installation that made it, so a restarted worker
finds it again and the containers of this installation whose session is gone can be
removed; other installations' containers on a shared engine are never touched. Tools run
as a non-root user; the main process runs as root so that user cannot stop the container,
but nothing has any capabilities. The root filesystem is read-only, memory, CPU and
processes are limited (by default sized to the engine's host), and there is no network
unless asked.

The watchdog stops the container once no process of the tools' user has run for the idle
time; the container is not restarted by the engine, and the next tool call starts it again
(`open_backend`) with its workspace and scratch volumes as they were. The writable places are the workspace at /workspace (a host directory or a named
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
from dataclasses import dataclass
from functools import cache
from typing import Any

import docker
import docker.errors
from docker.types import Mount
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tempi.activities.sandbox.docker_backend import USER_LABEL, DockerBackend
from tempi.activities.sandbox.errors import SandboxError, SandboxUnavailableError
from tempi.activities.sandbox.installation import INSTALLATION_LABEL, installation_id
from tempi.activities.sandbox.limits import DEFAULT_IDLE_STOP_SECONDS, DEFAULT_PIDS, check_memory
from tempi.activities.sandbox.workspace import WORKSPACE_DIR, record_workspace_base

DEFAULT_IMAGE = "tempi-sandbox:latest"
SESSION_LABEL = "tempi.session"
TMP_DIR = "/tmp"

_VOLUME_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_USER = re.compile(r"^[0-9]+:[0-9]+$")


class SandboxSpec(BaseModel):
    """How to make a sandbox container."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: str = DEFAULT_IMAGE
    # An absolute path is a host directory to bind-mount; anything else names a volume.
    workspace: str
    network: bool = False
    # None: sized to the engine's host (a quarter of its memory, half its CPUs).
    memory: str | None = None  # also the limit with swap: no swapping
    cpus: float | None = Field(default=None, gt=0)
    pids: int = Field(default=DEFAULT_PIDS, gt=0)
    # Stop the container after this long without a process of the tools' user; 0: never.
    idle_stop_seconds: float = Field(default=DEFAULT_IDLE_STOP_SECONDS, ge=0)
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
    def _memory(cls, value: str | None) -> str | None:
        return None if value is None else check_memory(value)

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


def _container_name(session_id: str, installation: str) -> str:
    """Unique per session and installation, so a retried create finds the first attempt's
    container and two installations never contend for one name."""
    readable = re.sub(r"[^A-Za-z0-9_.-]", "-", session_id)[:40]
    digest = hashlib.sha256(f"{installation}\0{session_id}".encode()).hexdigest()[:10]
    return f"tempi-{readable}-{digest}"


@dataclass(frozen=True)
class _Limits:
    memory: int | str
    nano_cpus: int


_MIN_MEMORY = 512 << 20


def _limits(client: Any, spec: SandboxSpec) -> _Limits:
    """The spec's limits, with the unset ones sized to the engine's host: a sandbox must
    not be able to take the whole machine from its owner and the other sandboxes."""
    info = client.info() if spec.memory is None or spec.cpus is None else {}
    memory: int | str = (
        spec.memory if spec.memory is not None else max(_MIN_MEMORY, int(info.get("MemTotal") or 0) // 4)
    )
    cpus = spec.cpus if spec.cpus is not None else max(1.0, int(info.get("NCPU") or 1) / 2)
    return _Limits(memory, int(cpus * 1_000_000_000))


# The container's main process. Every `step` seconds it looks for a process not owned by
# root (tools and helpers run as the sandbox user; init and this script as root) and exits,
# stopping the container, when there was none for `limit` seconds. Only shell builtins
# in the loop: it must keep working when the pids limit is reached. `read -t` on a FIFO
# this script holds open both ways is a sleep that forks nothing.
_WATCHDOG = r"""
limit=$1 step=$2 idle=0
dir=$(mktemp -d) && mkfifo "$dir/wait" && exec 3<>"$dir/wait" || exit 70
if [ "$limit" = 0 ]; then
  while :; do read -r -u 3 _; done
fi
while :; do
  busy=
  for proc in /proc/[0-9]*; do
    if [ -e "$proc" ] && [ ! -O "$proc" ]; then busy=1; break; fi
  done
  if [ -n "$busy" ]; then idle=0; else idle=$((idle + step)); fi
  if [ "$idle" -ge "$limit" ]; then exit 0; fi
  read -r -t "$step" -u 3 _
done
"""


def _watchdog_argv(idle_stop_seconds: float) -> list[str]:
    limit = 0 if idle_stop_seconds <= 0 else max(1, round(idle_stop_seconds))
    step = max(1, min(10, limit // 10))
    return ["bash", "-c", _WATCHDOG, "tempi-watchdog", str(limit), str(step)]


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


def _owned(container: Any, installation: str) -> bool:
    # Containers from before installations were labelled belong to whoever finds them by
    # session id (as before), but no sweep removes them.
    owner = container.labels.get(INSTALLATION_LABEL)
    return owner is None or owner == installation


def _session_containers(client: Any, session_id: str, installation: str) -> list[Any]:
    containers = client.containers.list(all=True, filters={"label": f"{SESSION_LABEL}={session_id}"})
    return [c for c in containers if _owned(c, installation)]


def _wake(container: Any, what: str) -> None:
    """Start a stopped (idle, or the engine restarted) or paused container again."""
    try:
        if container.status == "paused":
            container.unpause()
        elif container.status != "running":
            container.start()
    except docker.errors.APIError as error:
        raise SandboxUnavailableError(
            f"The sandbox {what} is {container.status} and cannot be started again: {error.explanation}"
        ) from None
    container.reload()


def _find(client: Any, session_id: str, installation: str) -> Any | None:
    usable = [
        c
        for c in _session_containers(client, session_id, installation)
        if c.status not in ("dead", "removing")
    ]
    if not usable:
        return None
    container = usable[0]
    _wake(container, f"of session {session_id}")
    return container


def _run(client: Any, spec: SandboxSpec, session_id: str, installation: str) -> Any:
    existing = _find(client, session_id, installation)
    if existing is not None:
        return existing
    limits = _limits(client, spec)
    try:
        return client.containers.run(
            spec.image,
            _watchdog_argv(spec.idle_stop_seconds),
            name=_container_name(session_id, installation),
            detach=True,
            init=True,
            # The main process runs as root, with no capabilities (cap_drop), so the
            # sandbox user cannot signal it; everything else runs as spec.user.
            user="0:0",
            labels={
                **spec.labels,
                SESSION_LABEL: session_id,
                INSTALLATION_LABEL: installation,
                USER_LABEL: spec.user,
            },
            network_mode=None if spec.network else "none",
            mem_limit=limits.memory,
            memswap_limit=limits.memory,
            nano_cpus=limits.nano_cpus,
            pids_limit=spec.pids,
            read_only=True,
            mounts=_mounts(client, spec),
            working_dir=WORKSPACE_DIR,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            # No restart policy: an idle sandbox stays stopped until its next tool call,
            # also across engine restarts.
            restart_policy={"Name": "no"},
        )
    except docker.errors.APIError as error:
        if error.status_code == 409:  # a concurrent attempt made it first
            found = _find(client, session_id, installation)
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


async def create_sandbox(
    spec: SandboxSpec, session_id: str, *, client: Any | None = None, installation: str | None = None
) -> SandboxInfo:
    """Start the session's sandbox, or return the one it already has (so a retry is safe),
    and record the workspace's starting state for `workspace_patch`. `installation`
    defaults to this tempi home's id."""
    client = _client(client)
    installation = installation or installation_id()
    container = await asyncio.to_thread(_run, client, spec, session_id, installation)
    try:
        await record_workspace_base(DockerBackend(container))
    except SandboxError:
        await asyncio.to_thread(_remove, container)
        raise
    return await asyncio.to_thread(_info, client, session_id, container)


async def find_sandbox(
    session_id: str, *, client: Any | None = None, installation: str | None = None
) -> SandboxInfo | None:
    """The session's sandbox (started again if it was stopped), or None if it has none."""
    client = _client(client)
    container = await asyncio.to_thread(_find, client, session_id, installation or installation_id())
    if container is None:
        return None
    return await asyncio.to_thread(_info, client, session_id, container)


def _open(client: Any, container_id: str) -> Any:
    try:
        container = client.containers.get(container_id)
    except docker.errors.NotFound:
        raise SandboxUnavailableError(f"The sandbox container {container_id[:12]} no longer exists") from None
    if container.status in ("dead", "removing"):
        raise SandboxUnavailableError(f"The sandbox container {container_id[:12]} is {container.status}")
    if container.status != "running":
        if SESSION_LABEL not in container.labels:
            raise SandboxUnavailableError(f"The container {container_id[:12]} is not a tempi sandbox")
        _wake(container, container_id[:12])  # stopped when idle: the session goes on
    return container


async def open_backend(container_id: str, *, client: Any | None = None) -> DockerBackend:
    """The execution backend for a sandbox container, started again if it stopped."""
    container = await asyncio.to_thread(_open, _client(client), container_id)
    return DockerBackend(container)


def _destroy(client: Any, session_id: str, installation: str) -> bool:
    containers = _session_containers(client, session_id, installation)
    for container in containers:
        _remove(container)
    return bool(containers)


async def destroy_sandbox(
    session_id: str, *, client: Any | None = None, installation: str | None = None
) -> bool:
    """Remove the session's sandbox and its scratch volumes (a named workspace volume is
    kept). False if there was none."""
    return await asyncio.to_thread(_destroy, _client(client), session_id, installation or installation_id())


def _remove_orphans(client: Any, live: set[str], installation: str) -> list[str]:
    removed: set[str] = set()
    mine = {"label": [SESSION_LABEL, f"{INSTALLATION_LABEL}={installation}"]}
    for container in client.containers.list(all=True, filters=mine):
        session_id = container.labels.get(SESSION_LABEL, "")
        # Checked again here: the engine's filter is the only thing between this sweep
        # and another installation's live sandboxes.
        if container.labels.get(INSTALLATION_LABEL) == installation and session_id not in live:
            _remove(container)
            removed.add(session_id)
    return sorted(removed)


async def remove_orphans(
    live_session_ids: Collection[str], *, client: Any | None = None, installation: str | None = None
) -> list[str]:
    """Remove the sandboxes made by this installation (`installation`, default this tempi
    home's id) whose session is not among `live_session_ids`, which are the sessions
    running on this installation's Temporal server; returns the sessions whose sandboxes
    were removed. Other installations' sandboxes, and unlabelled ones from before
    installations were labelled, are left alone."""
    return await asyncio.to_thread(
        _remove_orphans, _client(client), set(live_session_ids), installation or installation_id()
    )
