"""The owner's limits for docker sandboxes: `dockerSandbox` in `$TEMPI_HOME/settings.json`.

    "dockerSandbox": {"memory": "4g", "cpus": 1.5, "pids": 512, "idleStopSeconds": 900}

Only the global file counts, never a project's `.tempi/settings.json`: a repository the
agent works on must not raise its own sandbox's limits. Unset limits are sized to the
host of the Docker engine when the sandbox is made (see `lifecycle`).
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, ValidationError, field_validator

from tempi.activities.sandbox.errors import SandboxError
from tempi.agent.base import PiModel
from tempi.config.errors import ConfigError
from tempi.config.paths import global_settings_path
from tempi.config.settings import read_settings_file

SETTINGS_KEY = "dockerSandbox"
# Long enough for a person to read a reply and answer; a stopped sandbox starts again
# (workspace, /tmp and home kept) on the next tool call, in about a second.
DEFAULT_IDLE_STOP_SECONDS = 900.0
DEFAULT_PIDS = 512

_MEMORY = re.compile(r"^[1-9][0-9]*[bkmg]?$", re.IGNORECASE)


def check_memory(value: str) -> str:
    if not _MEMORY.match(value):
        raise ValueError('memory must be a size such as "512m" or "2g"')
    return value


class DockerSandboxSettings(PiModel):
    memory: str | None = None  # e.g. "4g"; also the limit with swap
    cpus: float | None = Field(default=None, gt=0)
    pids: int | None = Field(default=None, gt=0)
    # Stop a sandbox none of whose processes ran for this long; 0 never stops it.
    idle_stop_seconds: float | None = Field(default=None, ge=0)

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str | None) -> str | None:
        return None if value is None else check_memory(value)


def load_sandbox_settings(path: Path | None = None) -> DockerSandboxSettings:
    """The `dockerSandbox` object of the global settings file (all unset when absent)."""
    path = path if path is not None else global_settings_path()
    try:
        data = read_settings_file(path).get(SETTINGS_KEY) or {}
        if not isinstance(data, dict):
            raise SandboxError(f'"{SETTINGS_KEY}" in {path} must be an object')
        return DockerSandboxSettings.model_validate(data)
    except ConfigError as error:
        raise SandboxError(str(error)) from None
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise SandboxError(
            f'"{SETTINGS_KEY}" in {path} is not valid ({problems}); fix it and try again'
        ) from None
