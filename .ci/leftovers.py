"""What a test run may leave behind: processes of tempi or of a Temporal dev server, Docker
containers, tmpfs mounts under the temp directory, and git worktrees of this checkout.

    python3 .ci/leftovers.py snapshot FILE   # before the tests: what is there already
    python3 .ci/leftovers.py check FILE      # after: anything new is listed, exit 1

Only what appeared during the run counts, so a developer's own running tempi is not blamed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A process of these is the run's: a dev server, tempi's service or worker, a stdio MCP server.
PROCESS_MARKS = ("start-dev", "-m tempi", "tempi.workers", "bin/tempi ", "demo_server.py")


def _processes() -> list[str]:
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        line = " ".join(a.decode(errors="replace") for a in argv if a)
        if state != "Z" and any(mark in line + " " for mark in PROCESS_MARKS):
            found.append(f"pid {entry.name}: {line[:200]}")
    return found


def _containers() -> list[str]:
    try:
        done = subprocess.run(
            ["docker", "ps", "-a", "--format", "{{.ID}} {{.Names}} {{.Image}} {{.Status}}"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [line for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def _mounts() -> list[str]:
    temp = tempfile.gettempdir().rstrip("/") + "/"
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    return [
        f"{fields[1]} ({fields[2]})"
        for fields in (line.split() for line in lines)
        if fields[1].startswith(temp)
    ]


def _worktrees() -> list[str]:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "list", "--porcelain"],
        capture_output=True,
        text=True,
        check=False,
    )
    return [line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("worktree ")]


def _state() -> dict[str, list[str]]:
    return {
        "processes": _processes(),
        "containers": _containers(),
        "tmpfs mounts": _mounts(),
        "worktrees": _worktrees(),
    }


def _key(kind: str, item: str) -> str:
    # A process is the same process by its pid; a container by its id.
    return item.split(":", 1)[0] if kind == "processes" else item.split(" ", 1)[0]


def main() -> int:
    action, path = sys.argv[1], Path(sys.argv[2])
    if action == "snapshot":
        path.write_text(json.dumps(_state()))
        return 0
    before = json.loads(path.read_text())
    after = _state()
    new = {
        kind: [i for i in items if _key(kind, i) not in {_key(kind, b) for b in before.get(kind, [])}]
        for kind, items in after.items()
    }
    left = {kind: items for kind, items in new.items() if items}
    if not left:
        print("leftovers: none (no new processes, containers, tmpfs mounts or worktrees)")
        return 0
    print("leftovers: the test run left these behind:")
    for kind, items in left.items():
        for item in items:
            print(f"  {kind}: {item}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
