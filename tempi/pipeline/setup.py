"""The spec's `setup`: run once in the output checkout, then shared with every shard's
worktree, so steps, verify and the final verify all find what it made (a `.venv`, a
`node_modules`).

What setup made is what `git status` shows untracked or ignored after it ran in a clean
checkout. A shard's worktree gets those paths as a hard-link farm (`cp -al`: no copy of the
data, one link per file), and every text file or symlink in them that names the output
checkout's path is rewritten, as a file of its own, to name the shard's: a venv's scripts and
`pyvenv.cfg`, and an editable install's `.pth`, then point at the shard's own checkout.

The record that setup ran lives in the checkout's own git directory, so it goes when the
checkout goes (a run's end removes it): a new checkout runs setup again, and so does one
where something it made has gone missing."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from pydantic import BaseModel

from tempi.pipeline.commands import run_command
from tempi.pipeline.git_work import GitWorkError, git, git_dirs
from tempi.pipeline.run_types import CommandOutcome

SETUP_TIMEOUT_S = 3600
MARKER = "tempi-setup.json"  # in the output checkout's git directory: setup ran there
SHARED = "tempi-setup-shared.json"  # in a shard worktree's: what it was given


class SetupRecord(BaseModel):
    base_commit: str
    commands: list[str]
    products: list[str]  # paths relative to the checkout, what setup made


def _marker(worktree: str | Path) -> Path:
    return git_dirs(worktree)[0] / MARKER


def setup_record(worktree: str | Path) -> SetupRecord | None:
    """What setup made in this checkout, when it ran there and all of it is still there."""
    try:
        record = SetupRecord.model_validate_json(_marker(worktree).read_text())
    except (OSError, ValueError, GitWorkError):  # GitWorkError: a checkout git forgot
        return None
    if all(os.path.lexists(Path(worktree) / p) for p in record.products):
        return record
    return None


def untracked_paths(worktree: str | Path) -> list[str]:
    """Untracked and ignored paths (a directory as a whole when all of it is), as git shows them."""
    out = git(worktree, "status", "--porcelain=v1", "-z", "--ignored", "--untracked-files=normal")
    return sorted(entry[3:].rstrip("/") for entry in out.split("\0") if entry.startswith(("?? ", "!! ")))


def run_setup(commands: list[str], worktree: str, base_commit: str) -> CommandOutcome | None:
    """The setup commands in a clean checkout, unless they already ran there and what they
    made is all still there. Returns the first failure."""
    record = setup_record(worktree)
    if record is not None and record.commands == commands and record.base_commit == base_commit:
        return None
    _marker(worktree).unlink(missing_ok=True)
    # From a clean checkout, what is left untracked afterwards is exactly what setup made.
    git(worktree, "clean", "-q", "-fdx")
    for command in commands:
        outcome = run_command(command, worktree, SETUP_TIMEOUT_S)
        if not outcome.passed:
            return outcome
    made = SetupRecord(base_commit=base_commit, commands=commands, products=untracked_paths(worktree))
    _marker(worktree).write_text(made.model_dump_json())
    return None


def share_setup(source: str | Path, target: str | Path) -> list[str]:
    """Give `target` (a shard's clean worktree) what setup made in `source` (the output
    checkout); returns the paths given, none when setup did not run there."""
    record = setup_record(source) if Path(source).exists() else None
    if record is None or not record.products:
        # A worktree a committed shard handed on may hold that shard's note.
        (git_dirs(target)[0] / SHARED).unlink(missing_ok=True)
        return []
    _link_farm(Path(source), Path(target), record.products)
    _relocate(Path(source), Path(target), record.products)
    _note_shared(Path(target), record.products)
    return record.products


def _link_farm(source: Path, target: Path, products: list[str]) -> None:
    # A path the shard's checkout has already (tracked at its commit) stays as it is.
    missing = [p for p in products if not os.path.lexists(target / p)]
    if not missing:
        return
    cmd = ["cp", "-a", "--parents", "-t", str(target), "--", *missing]
    linked = subprocess.run([cmd[0], "-l", *cmd[1:]], cwd=source, capture_output=True, check=False)
    if linked.returncode != 0:
        # Another file system (no hard links across it): a copy.
        subprocess.run(cmd, cwd=source, capture_output=True, check=True)


def _relocate(source: Path, target: Path, products: list[str]) -> None:
    """Rewrite what names the source checkout to name the target: text files get a new file
    (a hard-linked one is never written to, so the source keeps its own), symlinks a new link."""
    olds = sorted({str(source), os.path.realpath(source)}, key=len, reverse=True)
    new = str(target)
    found = subprocess.run(
        ["grep", "-rlIZF", *(a for old in olds for a in ("-e", old)), "--", *products],
        cwd=target,
        capture_output=True,
        check=False,
    )
    for name in filter(None, found.stdout.split(b"\0")):
        path = target / os.fsdecode(name)
        data = path.read_bytes()
        for old in olds:
            data = data.replace(old.encode(), new.encode())
        _replace_file(path, data)
    links = subprocess.run(
        ["find", *(f"./{p}" for p in products), "-type", "l", "-print0"],
        cwd=target,
        capture_output=True,
        check=False,
    )
    for name in filter(None, links.stdout.split(b"\0")):
        path = target / os.fsdecode(name)
        dest = os.readlink(path)
        prefix = next((o for o in olds if dest == o or dest.startswith(o + "/")), None)
        if prefix is not None:
            path.unlink()
            os.symlink(new + dest[len(prefix) :], path)


def _replace_file(path: Path, data: bytes) -> None:
    mode = path.stat().st_mode
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tempi-")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def setup_excludes(worktree: str | Path) -> list[str]:
    """Pathspecs that keep setup's results out of a `git add` or `git clean` in a checkout
    that has them (a repository whose .gitignore does not name its `.venv` would otherwise
    put it in every patch, or lose it from the output checkout)."""
    git_dir = git_dirs(worktree)[0]
    try:
        products: list[str] = json.loads((git_dir / SHARED).read_text())
    except (OSError, ValueError):
        record = setup_record(worktree)
        products = record.products if record is not None else []
    return [f":(exclude,top,literal){p}" for p in products]


def _note_shared(target: Path, products: list[str]) -> None:
    (git_dirs(target)[0] / SHARED).write_text(json.dumps(products))
