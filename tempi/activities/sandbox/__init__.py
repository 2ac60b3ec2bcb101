"""Docker sandboxes: the `docker` execution backend and the lifecycle of its containers.

The names that need the Docker SDK are loaded on first use: every worker imports this
package at start, and most never run a sandbox (the SDK is a tenth of a second of a cold
start)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tempi.activities.sandbox.errors import SandboxError, SandboxUnavailableError
from tempi.activities.sandbox.installation import INSTALLATION_LABEL, installation_id
from tempi.activities.sandbox.limits import DockerSandboxSettings, load_sandbox_settings
from tempi.activities.sandbox.workspace import WORKSPACE_DIR, workspace_patch

if TYPE_CHECKING:
    from tempi.activities.sandbox.docker_backend import DockerBackend
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

_ON_FIRST_USE = {
    "DockerBackend": "docker_backend",
    **dict.fromkeys(
        (
            "DEFAULT_IMAGE",
            "SESSION_LABEL",
            "SandboxInfo",
            "SandboxSpec",
            "create_sandbox",
            "destroy_sandbox",
            "find_sandbox",
            "open_backend",
            "remove_orphans",
            "sandbox_task_queue",
        ),
        "lifecycle",
    ),
}


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


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
