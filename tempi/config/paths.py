"""Where tempi keeps its files.

Everything lives under one home directory (`$TEMPI_HOME`, default `~/.tempi`), laid out
like pi's `~/.pi/agent`, so pi's files can be copied over unchanged. They need not be:
models.json, auth.json and AGENTS.md that tempi's home lacks are read from pi's directory
(`$PI_CODING_AGENT_DIR`, default `~/.pi/agent`), so an existing pi setup works; pi's
settings.json is always read, beneath tempi's (settings.py), and pi's sessions are listed
beside tempi's.

The home holds API keys (models.json), transcripts and the Temporal database, so it is
private to its owner (mode 0700) whatever the umask: created so, and tightened when found
looser (with a note on stderr), so nothing written under it needs a mode of its own. A home
that another user owns is refused: its owner could read all of it.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path

TEMPI_HOME_ENV = "TEMPI_HOME"
PI_AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"
PROJECT_CONFIG_DIR = ".tempi"
PI_PROJECT_CONFIG_DIR = ".pi"
SETTINGS_JSON = "settings.json"
PRIVATE_DIR_MODE = 0o700

_checked_homes: set[Path] = set()
_checked_guard = threading.Lock()


class ForeignHomeError(Exception):
    """The home directory belongs to another user, who could read everything tempi keeps
    there (keys, transcripts, the Temporal database): tempi refuses to use it."""


def tempi_home() -> Path:
    """The home directory, made private on first use in this process. Raises
    ForeignHomeError, every time, when another user owns it."""
    configured = os.environ.get(TEMPI_HOME_ENV)
    home = Path(configured).expanduser() if configured else Path.home() / ".tempi"
    with _checked_guard:
        if home not in _checked_homes:
            make_private_dir(home)
            _checked_homes.add(home)
    return home


def make_private_dir(directory: Path) -> None:
    """Create `directory` with mode 0700, or tighten it to 0700 when it is ours and open to
    others; a note on stderr when its mode changed or is left open. Problems creating it
    are left to whoever writes there first, whose error names the file. A directory another
    user owns raises ForeignHomeError: its owner could read it all."""
    try:
        directory.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        info = directory.stat()
    except OSError:
        return
    if info.st_uid != os.getuid():
        raise ForeignHomeError(
            f"{directory} belongs to another user (uid {info.st_uid}), who could read the API keys, "
            f"transcripts and Temporal database tempi keeps there. Point {TEMPI_HOME_ENV} at a "
            f"directory you own (unset, it is ~/.tempi); if a command run with sudo made this "
            f"one, `sudo chown -R {os.getuid()} {directory}` gives it back to you."
        )
    loose = stat.S_IMODE(info.st_mode) & 0o077
    if not loose:
        return
    old = f"{stat.S_IMODE(info.st_mode):04o}"
    # A sticky directory (/tmp) is shared on purpose: never take it from its other users.
    if not info.st_mode & stat.S_ISVTX:
        try:
            os.chmod(directory, stat.S_IMODE(info.st_mode) & ~0o077)
        except OSError:
            pass
        else:
            print(
                f"tempi: made {directory} private (mode {old} -> 0700): it holds API keys and transcripts",
                file=sys.stderr,
            )
            return
    print(
        f"tempi: warning: {directory} is open to other users (mode {old}) and holds API keys and "
        f"transcripts; run `chmod 700 {directory}` or point {TEMPI_HOME_ENV} at a private directory",
        file=sys.stderr,
    )


def pi_agent_dir() -> Path:
    """pi's own configuration directory, as pi finds it."""
    configured = os.environ.get(PI_AGENT_DIR_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".pi" / "agent"


def own_or_pis(name: str) -> Path:
    """`name` in tempi's home, or pi's file of that name when tempi has none and pi has.
    Writes go to the same file, so a setting changed in tempi is changed for pi too, as
    it would be had pi changed it."""
    own = tempi_home() / name
    if own.exists():
        return own
    pis = pi_agent_dir() / name
    return pis if pis.exists() else own


def models_json_path() -> Path:
    return own_or_pis("models.json")


def global_settings_path() -> Path:
    """The global settings file tempi writes: its own, or pi's when it has none."""
    return own_or_pis(SETTINGS_JSON)


def global_settings_paths() -> list[Path]:
    """The global settings files read, lowest precedence first: pi's, then tempi's (one
    file when both homes are the same directory)."""
    pis, own = pi_agent_dir() / SETTINGS_JSON, tempi_home() / SETTINGS_JSON
    return [own] if pis == own else [pis, own]


def project_settings_path(cwd: Path) -> Path:
    return cwd / PROJECT_CONFIG_DIR / SETTINGS_JSON


def project_settings_paths(cwd: Path) -> list[Path]:
    """The project's settings files, lowest precedence first: pi's `.pi/`, then `.tempi/`."""
    return [cwd / PI_PROJECT_CONFIG_DIR / SETTINGS_JSON, project_settings_path(cwd)]


def default_sessions_root() -> Path:
    return tempi_home() / "sessions"


def session_roots() -> list[Path]:
    """Where sessions are looked for: tempi's `sessions/` (where new ones go), then pi's."""
    return [default_sessions_root(), pi_agent_dir() / "sessions"]


def expand_path(value: str, relative_to: Path) -> Path:
    """A path from a config file: `~` expands to the home directory, relative paths
    are taken from `relative_to`."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else relative_to / path
