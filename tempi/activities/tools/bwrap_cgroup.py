"""A cgroup per sandboxed command: a memory limit for the command as a whole, and for
workers running as root a process limit.

`ulimit -v` bounds each process alone, so a command that starts several processes could
use several times the limit together; a cgroup's `memory.max` (v1: `memory.limit_in_bytes`)
holds for all of them, and the kernel's OOM killer ends the command, not the worker. The
kernel does not apply RLIMIT_NPROC to processes of uid 0, and a root worker's sandbox maps
its unprivileged uid to uid 0 on the host, so there `pids.max` holds the process count.

Each controller is used when the worker can create a child of its own cgroup with it
(cgroup v1, or v2 with the controller delegated to its children); otherwise that limit is
the per-process one alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

_V1_ROOT = Path("/sys/fs/cgroup")
_V2_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
_REMOVE_TRIES = 40
_REMOVE_WAIT_S = 0.05
# The file that holds a controller's limit, in v1 and in v2.
_LIMIT_FILES = {"pids": ("pids.max", "pids.max"), "memory": ("memory.limit_in_bytes", "memory.max")}


@dataclass(frozen=True)
class _Parent:
    path: Path
    v2: bool


@cache
def _parent(controller: str) -> _Parent | None:
    """The worker's own cgroup for `controller`, if children can be made in it with a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        v1_root = _V1_ROOT / controller
        if controller in controllers.split(",") and v1_root.is_dir():
            candidate = v1_root / path.lstrip("/")
            if os.access(candidate, os.W_OK):
                return _Parent(candidate, v2=False)
    for line in lines:
        hierarchy, _, path = line.split(":", 2)
        if hierarchy != "0":
            continue
        for root in _V2_ROOTS:
            candidate = root / path.lstrip("/")
            try:
                delegated = (candidate / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if controller in delegated and os.access(candidate, os.W_OK):
                return _Parent(candidate, v2=True)
    return None


def available(controller: str = "pids") -> bool:
    return _parent(controller) is not None


@dataclass
class CommandGroup:
    """The cgroup directories one command runs in (one per v1 hierarchy; v2 has one)."""

    paths: list[Path] = field(default_factory=list)


def create(*, max_processes: int = 0, memory_bytes: int = 0) -> CommandGroup | None:
    """Fresh cgroups with the limits asked for (0: none), or None when none can be made."""
    limits = {"pids": max_processes, "memory": memory_bytes}
    group = CommandGroup()
    name = f"tempi-bwrap-{secrets.token_hex(6)}"
    made: list[Path] = []  # v2 has one folder for every controller
    for controller, value in limits.items():
        parent = _parent(controller) if value > 0 else None
        if parent is None:
            continue
        path = parent.path / name
        try:
            if path not in made:
                path.mkdir()
                made.append(path)
            (path / _LIMIT_FILES[controller][1 if parent.v2 else 0]).write_text(str(value))
        except OSError:
            continue
        if path not in group.paths:
            group.paths.append(path)
    for path in made:
        if path not in group.paths:
            with contextlib.suppress(OSError):
                path.rmdir()
    return group if group.paths else None


def enter_argv(group: CommandGroup) -> list[str]:
    """An argv prefix that moves itself into the group's cgroups, then runs the rest."""
    script = 'for g in "$@"; do [ "$g" = -- ] && break; echo $$ > "$g/cgroup.procs" || exit 125; shift; done; shift; exec "$@"'
    return ["/bin/sh", "-c", script, "tempi-cgroup", *(str(p) for p in group.paths), "--"]


async def remove(group: CommandGroup) -> None:
    """Remove the cgroups once their last process has gone (the sandbox's PID namespace ends
    with its first process, so that is soon)."""
    for path in group.paths:
        for _ in range(_REMOVE_TRIES):
            try:
                path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                await asyncio.sleep(_REMOVE_WAIT_S)
