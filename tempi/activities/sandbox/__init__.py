"""Docker sandboxes: the `docker` execution backend and the lifecycle of its containers."""

from tempi.activities.sandbox.docker_backend import DockerBackend
from tempi.activities.sandbox.errors import SandboxError, SandboxUnavailableError
from tempi.activities.sandbox.installation import INSTALLATION_LABEL, installation_id
from tempi.activities.sandbox.lifecycle import (
    DEFAULT_IMAGE,
    SESSION_LABEL,
    SandboxInfo,
    SandboxSpec,
    create_sandbox,
    destroy_sandbox,
    find_sandbox,
    open_backend,
    remove_orphans,
    sandbox_task_queue,
)
from tempi.activities.sandbox.limits import DockerSandboxSettings, load_sandbox_settings
from tempi.activities.sandbox.workspace import WORKSPACE_DIR, workspace_patch

__all__ = [
    "DEFAULT_IMAGE",
    "INSTALLATION_LABEL",
    "SESSION_LABEL",
    "WORKSPACE_DIR",
    "DockerBackend",
    "DockerSandboxSettings",
    "SandboxError",
    "SandboxInfo",
    "SandboxSpec",
    "SandboxUnavailableError",
    "create_sandbox",
    "destroy_sandbox",
    "find_sandbox",
    "installation_id",
    "load_sandbox_settings",
    "open_backend",
    "remove_orphans",
    "sandbox_task_queue",
    "workspace_patch",
]
