"""Workspace trust: a repository's own `.tempi/` config runs code or chooses paths (its
extensions, its MCP servers, the settings `sessionDir`, `shellPath`, `shellCommandPrefix`
in `.tempi/settings.json` or pi's `.pi/settings.json`), so it is used only once the owner
has trusted that repository.

Trust is recorded in the owner's home (`trusted-projects.json`) as the project's path and a
fingerprint of those files; a change to any of them is a different fingerprint, so the
project is untrusted again until the owner says otherwise. Every reader of project config,
front end and worker alike, asks `project_trusted(cwd)` at the moment it reads, so a file the
model rewrote mid-session is refused, not run.

A record may also cover a folder and everything below it (`covers_below`), for the git
worktrees a pipeline makes of a repository whose spec trusts it.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from hashlib import sha256
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from tempi.config.paths import PROJECT_CONFIG_DIR, project_settings_paths, tempi_home

TRUST_FILE = "trusted-projects.json"
# Project settings that run code or choose where files go; other keys need no trust.
SECURITY_SETTINGS = ("sessionDir", "shellPath", "shellCommandPrefix")
_SKIPPED_DIRS = {"__pycache__"}
# A project's config past this is not hashed whole; it is untrusted (and said so).
MAX_CONFIG_BYTES = 16 * 1024 * 1024


class TrustRecord(BaseModel):
    fingerprint: str
    trusted_at: str = ""
    covers_below: bool = False


class TrustFile(BaseModel):
    projects: dict[str, TrustRecord] = Field(default_factory=dict)


def trust_file_path() -> Path:
    return tempi_home() / TRUST_FILE


def project_dir(cwd: Path) -> Path:
    return cwd / PROJECT_CONFIG_DIR


def security_settings_by_file(cwd: Path) -> list[tuple[Path, dict[str, object]]]:
    """Each project settings file (`.pi/`, then `.tempi/`) with the keys in it that need trust."""
    return [(path, found) for path in project_settings_paths(cwd) if (found := security_settings(path))]


def security_settings(path: Path) -> dict[str, object]:
    """The keys of settings file `path` that need trust, as written (an unreadable file has
    none: the settings reader reports it)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {key: data[key] for key in SECURITY_SETTINGS if key in data}


def _extension_files(cwd: Path) -> list[Path]:
    root = project_dir(cwd) / "extensions"
    if not root.is_dir():
        return []
    found: list[Path] = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIPPED_DIRS)
        found += [Path(directory) / name for name in sorted(files)]
    return found


def project_fingerprint(cwd: Path) -> str | None:
    """A hash over everything in the project's `.tempi/` that needs trust, or None when it has
    none of it (then there is nothing to trust)."""
    base = project_dir(cwd)
    parts: list[tuple[str, bytes]] = []
    mcp = base / "mcp.json"
    files = ([mcp] if mcp.is_file() else []) + _extension_files(cwd)
    total = 0
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            data = b"\0unreadable"
        total += len(data)
        if total > MAX_CONFIG_BYTES:
            return "too-large"
        parts.append((path.relative_to(base).as_posix(), data))
    for path, settings in security_settings_by_file(cwd):
        # Named relative to `.tempi/` (pi's as `../.pi/settings.json`), so trust recorded
        # before pi's file was read still matches a project that has none.
        name = os.path.relpath(path, base).replace(os.sep, "/")
        parts.append((f"{name}#security", json.dumps(settings, sort_keys=True).encode()))
    if not parts:
        return None
    digest = sha256()
    for name, data in parts:
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def _read_store() -> TrustFile:
    path = trust_file_path()
    try:
        return TrustFile.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return TrustFile()
    except (OSError, ValidationError, ValueError):
        # A broken record trusts nothing; recording trust again writes a good one.
        return TrustFile()


def _write_store(store: TrustFile) -> None:
    path = trust_file_path()
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(store.model_dump_json(indent=2))
    os.replace(temp, path)


def _key(path: Path) -> str:
    return str(path.resolve())


def project_trusted(cwd: Path) -> bool:
    """Whether the project's config as it is now is the one its owner trusted."""
    fingerprint = project_fingerprint(cwd)
    if fingerprint is None:
        return False
    store = _read_store()
    here = Path(_key(cwd))
    record = store.projects.get(str(here))
    if record is not None and record.fingerprint == fingerprint:
        return True
    for folder in here.parents:
        above = store.projects.get(str(folder))
        if above is not None and above.covers_below and above.fingerprint == fingerprint:
            return True
    return False


def trust_project(cwd: Path, *, fingerprint: str | None = None, covers_below: bool = False) -> None:
    """Record the project's config as it is now (or `fingerprint`) as trusted."""
    value = fingerprint if fingerprint is not None else project_fingerprint(cwd)
    if value is None:
        return
    store = _read_store()
    store.projects[_key(cwd)] = TrustRecord(
        fingerprint=value,
        trusted_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        covers_below=covers_below,
    )
    _write_store(store)


def forget_project(cwd: Path) -> bool:
    """Drop the project's record; whether there was one."""
    store = _read_store()
    if store.projects.pop(_key(cwd), None) is None:
        return False
    _write_store(store)
    return True


def what_needs_trust(cwd: Path) -> list[str]:
    """What the project's config would run or choose, one line each, for the owner to judge."""
    lines: list[str] = []
    mcp = project_dir(cwd) / "mcp.json"
    if mcp.is_file():
        lines += _describe_mcp(mcp)
    for path in _extension_files(cwd):
        lines.append(f"extension code: {path}")
    for path, settings in security_settings_by_file(cwd):
        for key, value in settings.items():
            lines.append(f"setting {key} in {path}: {json.dumps(value)}")
    return lines


def _describe_mcp(path: Path) -> list[str]:
    try:
        servers = json.loads(path.read_text(encoding="utf-8")).get("mcpServers") or {}
    except (OSError, ValueError, AttributeError, RecursionError):
        return [f"MCP servers: {path} (not readable as JSON)"]
    if not isinstance(servers, dict):
        return [f"MCP servers: {path}"]
    lines = []
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            continue
        if entry.get("command"):
            args = " ".join(str(a) for a in entry.get("args") or [])
            lines.append(f"MCP server {name!r} runs a command: {entry['command']} {args}".rstrip())
        elif entry.get("url"):
            lines.append(f"MCP server {name!r} is contacted at {entry['url']}")
    return lines
