"""A pids cgroup per sandboxed command, for workers running as root.

The kernel does not apply RLIMIT_NPROC to processes of uid 0, and a root worker's sandbox
maps its unprivileged uid to uid 0 on the host (so the files it makes belong to the
worker). A cgroup's `pids.max` holds whatever the uid. This is used when the worker can
create a child of its own pids cgroup (cgroup v1, or v2 with `pids` delegated to its
children); otherwise the process limit is not enforced for root workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from functools import cache
from pathlib import Path

_V1_ROOT = Path("/sys/fs/cgroup/pids")
_V2_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
_REMOVE_TRIES = 40
_REMOVE_WAIT_S = 0.05


@cache
def _parent() -> Path | None:
    """The worker's own pids cgroup, if children can be made in it with a pids limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(",") and _V1_ROOT.is_dir():
            candidate = _V1_ROOT / path.lstrip("/")
            if os.access(candidate, os.W_OK):
                return candidate
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
            if "pids" in delegated and os.access(candidate, os.W_OK):
                return candidate
    return None


def available() -> bool:
    return _parent() is not None


def create(max_processes: int) -> Path | None:
    """A fresh cgroup limited to `max_processes`, or None when cgroups cannot be used."""
    parent = _parent()
    if parent is None:
        return None
    group = parent / f"tempi-bwrap-{secrets.token_hex(6)}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(max_processes))
    except OSError:
        with contextlib.suppress(OSError):
            group.rmdir()
        return None
    return group


def enter_argv(group: Path) -> list[str]:
    """An argv prefix that moves itself into `group`, then runs the rest of the argv."""
    script = 'echo $$ > "$1/cgroup.procs" || exit 125; shift; exec "$@"'
    return ["/bin/sh", "-c", script, "tempi-cgroup", str(group)]


async def remove(group: Path) -> None:
    """Remove the cgroup once its last process has gone (the sandbox's PID namespace ends
    with its first process, so that is soon)."""
    for _ in range(_REMOVE_TRIES):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            await asyncio.sleep(_REMOVE_WAIT_S)
