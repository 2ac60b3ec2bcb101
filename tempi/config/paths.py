"""Where tempi keeps its files.

Everything lives under one home directory (`$TEMPI_HOME`, default `~/.tempi`), laid out
like pi's `~/.pi/agent`, so pi's files can be copied over unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

TEMPI_HOME_ENV = "TEMPI_HOME"
PROJECT_CONFIG_DIR = ".tempi"


def tempi_home() -> Path:
    configured = os.environ.get(TEMPI_HOME_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".tempi"


def models_json_path() -> Path:
    return tempi_home() / "models.json"


def global_settings_path() -> Path:
    return tempi_home() / "settings.json"


def project_settings_path(cwd: Path) -> Path:
    return cwd / PROJECT_CONFIG_DIR / "settings.json"


def default_sessions_root() -> Path:
    return tempi_home() / "sessions"


def expand_path(value: str, relative_to: Path) -> Path:
    """A path from a config file: `~` expands to the home directory, relative paths
    are taken from `relative_to`."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else relative_to / path
