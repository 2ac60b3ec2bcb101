"""Docker for the sandbox tests: the engine, the sandbox image (built once), sandboxes.

Test modules import the fixtures they use from here. Without a reachable Docker engine
the tests are skipped, unless TEMPI_REQUIRE_DOCKER=1 (as in CI), where that is a failure.
The offline base image is built once and cached by its tag (about 45 s here); the
sandbox image on top of it is rebuilt each session from Docker's layer cache (~1 s).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from tempi.activities.sandbox import (
    SESSION_LABEL,
    DockerBackend,
    SandboxInfo,
    SandboxSpec,
    create_sandbox,
    destroy_sandbox,
    open_backend,
)

REQUIRE_DOCKER_ENV = "TEMPI_REQUIRE_DOCKER"
DEPLOY_DIR = Path(__file__).resolve().parents[1] / "deploy" / "sandbox"
BASE_IMAGE = os.environ.get("TEMPI_BASE_IMAGE", "tempi-base:bookworm")
SANDBOX_IMAGE = "tempi-sandbox:latest"


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_DOCKER_ENV) == "1":
        pytest.fail(f"{reason}; {REQUIRE_DOCKER_ENV}=1 requires Docker")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as error:
        _unavailable(f"No Docker engine is reachable ({error})")
    yield client
    client.close()


@pytest.fixture(scope="session")
def sandbox_image(docker_client: Any) -> str:
    try:
        docker_client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        built = subprocess.run(
            [str(DEPLOY_DIR / "build-base.sh"), BASE_IMAGE], capture_output=True, text=True, check=False
        )
        if built.returncode != 0:
            pytest.fail(f"Building {BASE_IMAGE} failed:\n{built.stdout}\n{built.stderr}")
    try:
        docker_client.images.build(
            path=str(DEPLOY_DIR), buildargs={"BASE_IMAGE": BASE_IMAGE}, tag=SANDBOX_IMAGE, rm=True
        )
    except docker.errors.BuildError as error:
        log = "".join(str(item.get("stream", item)) for item in error.build_log)
        pytest.fail(f"Building {SANDBOX_IMAGE} failed: {error}\n{log}")
    return SANDBOX_IMAGE


def open_host_dir(path: Path) -> Path:
    """A host directory the sandbox user (another uid) may write in."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    return path


@dataclass
class Sandbox:
    info: SandboxInfo
    backend: DockerBackend
    host_workspace: Path | None  # None for a volume workspace


@dataclass
class SandboxFactory:
    """Makes sandboxes for one test and removes them afterwards."""

    client: Any
    image: str
    tmp_path: Path
    session_ids: list[str]

    async def create(self, workspace: Path | str | None = None, **spec: Any) -> Sandbox:
        session_id = f"test-{uuid.uuid4().hex[:12]}"
        if workspace is None:
            workspace = open_host_dir(self.tmp_path / f"ws-{session_id}")
        self.session_ids.append(session_id)
        info = await create_sandbox(
            SandboxSpec(image=self.image, workspace=str(workspace), **spec), session_id, client=self.client
        )
        backend = await open_backend(info.container_id, client=self.client)
        return Sandbox(info, backend, workspace if isinstance(workspace, Path) else None)


def remove_session_containers(client: Any, session_id: str) -> None:
    """Every container of the session, whichever installation made it (tests switch
    installations), with its scratch volumes."""
    for container in client.containers.list(all=True, filters={"label": f"{SESSION_LABEL}={session_id}"}):
        try:
            container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as error:
            if "already in progress" not in str(error.explanation):
                raise


@pytest.fixture
async def sandboxes(docker_client: Any, sandbox_image: str, tmp_path: Path) -> AsyncIterator[SandboxFactory]:
    factory = SandboxFactory(docker_client, sandbox_image, tmp_path, [])
    yield factory
    for session_id in factory.session_ids:
        remove_session_containers(docker_client, session_id)


@pytest.fixture(scope="session")
async def shared_sandbox(
    docker_client: Any, sandbox_image: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Sandbox]:
    """One sandbox for tests that each work in a directory of their own inside it."""
    factory = SandboxFactory(docker_client, sandbox_image, tmp_path_factory.mktemp("shared-sandbox"), [])
    sandbox = await factory.create()
    yield sandbox
    await destroy_sandbox(sandbox.info.session_id, client=docker_client)
