"""`--sandbox container:NAME`: tools run in a container the user made and keeps.

mom's `--sandbox=docker:NAME`: a long-lived container (Alpine, root, network on, the
working directory bind-mounted at /workspace) whose installed packages outlast every
run. tempi never creates, starts, stops or removes it; it only checks that it runs and
finds where the working directory is mounted in it. Tools run as the container's own
user, from that mount point.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
from collections.abc import Sequence
from typing import Any

import docker.errors
from pydantic import BaseModel

from tempi.activities.sandbox.docker_backend import DockerBackend
from tempi.activities.sandbox.docker_exec import ExecTarget, run_to_completion
from tempi.activities.sandbox.errors import SandboxError, SandboxUnavailableError
from tempi.activities.sandbox.lifecycle import _client, _engine_name
from tempi.activities.tools.backend import ExecResult, OutputSink
from tempi.activities.tools.errors import ToolError


class UserContainer(BaseModel):
    """The user's container as a session uses it; tool activities go to `task_queue`."""

    container_id: str
    task_queue: str
    workdir: str  # where the host working directory is mounted inside the container


def create_hint(name: str, working_dir: str) -> str:
    return f"docker run -d --name {name} -v {working_dir}:/workspace alpine sleep infinity"


def _mount_point(container: Any, name: str, working_dir: str) -> str:
    """Where `working_dir` (or a folder above it) is bind-mounted in the container."""
    wanted = os.path.realpath(working_dir)
    mounts = container.attrs.get("Mounts") or []
    best: tuple[str, str] | None = None
    for mount in mounts:
        source = os.path.realpath(str(mount.get("Source") or ""))
        if mount.get("Type") != "bind" or not source:
            continue
        if (wanted == source or wanted.startswith(source.rstrip("/") + "/")) and (
            best is None or len(source) > len(best[0])
        ):
            best = (source, str(mount["Destination"]))
    if best is None:
        shown = ", ".join(f"{m.get('Source')} at {m.get('Destination')}" for m in mounts) or "none"
        raise SandboxError(
            f"The container {name} does not mount the working directory {working_dir} "
            f"(its mounts: {shown}). Make it with the folder mounted, e.g. "
            f"`docker rm -f {name} && {create_hint(name, working_dir)}`"
        )
    source, destination = best
    rest = os.path.relpath(wanted, source)
    return destination if rest == "." else posixpath.join(destination, *rest.split(os.sep))


def _running(client: Any, name_or_id: str, shown: str, working_dir: str) -> Any:
    try:
        container = client.containers.get(name_or_id)
    except docker.errors.NotFound:
        raise SandboxUnavailableError(
            f"There is no container {shown} on this Docker engine; make one with "
            f"`{create_hint(shown, working_dir)}`"
        ) from None
    except docker.errors.APIError as error:
        raise SandboxUnavailableError(f"Cannot look up the container {shown}: {error.explanation}") from None
    status = container.status
    # Starting it is the user's call: it is their container.
    if status in ("removing", "dead"):
        raise SandboxUnavailableError(
            f"The container {shown} was removed; make one again with `{create_hint(shown, working_dir)}`"
        )
    if status == "paused":
        raise SandboxUnavailableError(
            f"The container {shown} is paused; resume it with `docker unpause {shown}`"
        )
    if status != "running":
        raise SandboxUnavailableError(
            f"The container {shown} is {status}; start it with `docker start {shown}`"
        )
    return container


def _numeric_user(container: Any) -> str:
    """The container's own user as uid:gid (files tools write belong to it)."""
    user = str((container.attrs.get("Config") or {}).get("User") or "")
    if user in ("", "root", "0", "0:0"):
        return "0:0"
    uid, _, gid = user.partition(":")
    if uid.isdigit() and gid.isdigit():
        return user
    target = ExecTarget(container.client.api, container.id, user)
    found = run_to_completion(target, ["sh", "-c", 'echo "$(id -u):$(id -g)"'])
    answer = found.stdout.decode().strip()
    if found.exit_code != 0 or not answer.replace(":", "").isdigit():
        raise SandboxError(f"Cannot tell which uid:gid the user {user!r} of the container is")
    return answer


def _attach(client: Any, name: str, working_dir: str) -> UserContainer:
    container = _running(client, name, name, working_dir)
    return UserContainer(
        container_id=container.id,
        task_queue=f"sandbox-{_engine_name(client)}",
        workdir=_mount_point(container, name, working_dir),
    )


def find_user_container(name: str, working_dir: str, *, client: Any | None = None) -> UserContainer:
    """The running container `name`, where it mounts `working_dir`, and the task queue of
    the host whose engine has it (blocking). Raises SandboxError saying what to do when it
    cannot be used."""
    return _attach(_client(client), name, working_dir)


async def attach_user_container(name: str, working_dir: str, *, client: Any | None = None) -> UserContainer:
    """`find_user_container` off the event loop."""
    return await asyncio.to_thread(find_user_container, name, working_dir, client=client)


_SIGKILLED = 137
_KILLED_CHECKS = 10
_KILLED_CHECK_INTERVAL_S = 0.1


class UserContainerBackend(DockerBackend):
    """A command that fails because the user stopped or removed the container says so,
    rather than showing only the exit code the kill left."""

    def __init__(self, client: Any, container: Any, name: str, working_dir: str) -> None:
        super().__init__(container, user=_numeric_user(container), any_shell=True)
        self._check = (client, container.id, name, working_dir)

    async def exec(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        on_output: OutputSink,
        timeout: float | None = None,
        abort: asyncio.Event | None = None,
        merge_stderr: bool = True,
    ) -> ExecResult:
        try:
            result = await super().exec(
                argv, cwd=cwd, on_output=on_output, timeout=timeout, abort=abort, merge_stderr=merge_stderr
            )
        except SandboxUnavailableError as lost:
            # The container went while the command ran, and its exec with it: say what the
            # user can do about it, as for a command killed with its container.
            await self._say_if_gone(_KILLED_CHECKS)
            raise ToolError(f"The command stopped: {lost}") from None
        if result.exit_code != 0 and not result.aborted:
            await self._say_if_gone(_KILLED_CHECKS if result.exit_code == _SIGKILLED else 1)
        return result

    async def _say_if_gone(self, checks: int) -> None:
        """A ToolError saying why, if the container stopped or went. The engine may still show
        a container running for a moment while it is being removed, so a command SIGKILLed
        with it looks again before believing it."""
        for check in range(checks):
            try:
                await asyncio.to_thread(_running, *self._check)
            except SandboxError as err:
                raise ToolError(f"The command stopped: {err}") from None
            if check + 1 < checks:
                await asyncio.sleep(_KILLED_CHECK_INTERVAL_S)


def _open(client: Any, container_id: str, name: str, working_dir: str) -> tuple[DockerBackend, str]:
    container = _running(client, container_id, name, working_dir)
    backend = UserContainerBackend(client, container, name, working_dir)
    return backend, _mount_point(container, name, working_dir)


async def open_user_container(
    container_id: str, name: str, working_dir: str, *, client: Any | None = None
) -> tuple[DockerBackend, str]:
    """The backend for the user's container and the working directory's place in it.
    SandboxUnavailableError when it was stopped or removed since the session found it."""
    return await asyncio.to_thread(_open, _client(client), container_id, name, working_dir)
