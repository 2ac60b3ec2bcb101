"""Finding a pipeline's work: the base commit, the targets at it, and the shards.

Plain functions over git, so a dry run, the tests and the workflow's activities all
see the same sorted, deterministic list. Files come from the base commit's tree, never the
working tree: an uncommitted file is not a target, and a dirty checkout changes nothing."""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import subprocess
from itertools import islice
from pathlib import Path

from pydantic import BaseModel

from tempi.pipeline.globs import excluded, matches
from tempi.pipeline.spec import PipelineSpec, TargetsSpec, work_definition

TARGETS_COMMAND_TIMEOUT = 300  # seconds; a listing command that hangs should not hang CI forever


class TargetError(Exception):
    """The spec names something the repository does not have; the message names the key."""


class Shard(BaseModel):
    index: int  # from 1, in target order
    id: str  # from the shard's targets, so it names the same work on every run
    files: list[str]
    directory: str  # the directory its targets share ('.' for the top, '' when they share none)


class Discovery(BaseModel):
    root: str
    base: str  # the spec's repo.base as written
    base_commit: str
    targets: list[str]
    shards: list[Shard]


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, check=False, env=_git_env(), timeout=120
    )


def _git_env() -> dict[str, str]:
    # Only read the repository: no pager, no prompt for credentials, no locale surprises.
    env = dict(os.environ)
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"})
    return env


def repo_root(path: Path) -> Path:
    if not path.is_dir():
        raise TargetError(f"repo.path: {path} is not a directory; give the path of a git repository")
    proc = _git(path, "rev-parse", "--show-toplevel")
    if proc.returncode != 0:
        raise TargetError(
            f"repo.path: {path} is not in a git repository; run `git init` there or give another path"
        )
    return Path(proc.stdout.decode().strip())


def resolve_base(root: Path, base: str) -> str:
    proc = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{base}^{{commit}}")
    if proc.returncode != 0:
        raise TargetError(
            f"repo.base: {base!r} is not a commit in {root}; give a branch, tag or commit that exists "
            "(`git branch` lists the branches)"
        )
    return proc.stdout.decode().strip()


def files_at(root: Path, commit: str) -> list[str]:
    """Every regular file in the commit's tree (no submodules, no symlinks), sorted."""
    proc = _git(root, "ls-tree", "-r", "-z", "--full-tree", commit)
    if proc.returncode != 0:
        raise TargetError(f"repo.base: cannot list the files of {commit}: {proc.stderr.decode().strip()}")
    files = []
    for entry in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if not entry:
            continue
        meta, _, path = entry.partition("\t")
        mode, kind, _ = meta.split(" ", 2)
        if kind == "blob" and mode != "120000":
            files.append(path)
    return sorted(files)


def select_files(files: list[str], globs: list[str], exclude: list[str]) -> list[str]:
    return sorted(f for f in files if any(matches(f, g) for g in globs) and not excluded(f, exclude))


def command_targets(root: Path, command: str, base_commit: str) -> list[str]:
    """Run `targets.command` in the repository; each non-empty output line is a target.
    It runs in the working tree, so it gets the base commit as $TEMPI_PIPELINE_BASE to look
    at that commit if the checkout differs (e.g. `git grep -l old_api "$TEMPI_PIPELINE_BASE"`)."""
    env = dict(os.environ, TEMPI_PIPELINE_BASE=base_commit)
    try:
        proc = subprocess.run(
            command,
            shell=True,
            cwd=root,
            env=env,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=TARGETS_COMMAND_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise TargetError(
            f"targets.command: still running after {TARGETS_COMMAND_TIMEOUT}s; make it print its targets and exit"
        ) from None
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-5:]
        raise TargetError(
            f"targets.command: exited with {proc.returncode}; it must print one target per line and exit 0"
            + ("\n  " + "\n  ".join(tail) if tail else "")
        )
    lines = (line.strip() for line in proc.stdout.decode(errors="replace").splitlines())
    # A target that names a path at the base commit is spelt like one from a glob.
    return sorted({_commit_prefix_removed(line, base_commit) for line in lines if line})


def _commit_prefix_removed(line: str, base_commit: str) -> str:
    # `git grep -l PATTERN COMMIT` prints `COMMIT:path`.
    return line.split(":", 1)[1] if line.startswith(f"{base_commit}:") else line.removeprefix("./")


def shard_targets(targets: list[str], group_by: str, size: int | None) -> list[Shard]:
    groups: list[list[str]] = []
    if group_by == "directory":
        by_dir: dict[str, list[str]] = {}
        for target in targets:
            by_dir.setdefault(posixpath.dirname(target) or ".", []).append(target)
        for directory in sorted(by_dir):
            groups.extend(_chunks(by_dir[directory], size))
    else:
        groups.extend(_chunks(targets, size))
    return [
        Shard(index=i, id=_shard_id(files), files=files, directory=_common_directory(files))
        for i, files in enumerate(groups, start=1)
    ]


def _chunks(items: list[str], size: int | None) -> list[list[str]]:
    if size is None:
        return [items] if items else []
    it = iter(items)
    return list(iter(lambda: list(islice(it, size)), []))


def _shard_id(files: list[str]) -> str:
    return hashlib.sha256("\n".join(files).encode()).hexdigest()[:12]


def _common_directory(files: list[str]) -> str:
    dirs = {posixpath.dirname(f) or "." for f in files}
    return dirs.pop() if len(dirs) == 1 else ""


def list_targets(root: Path, targets: TargetsSpec, base_commit: str) -> list[str]:
    if targets.command is not None:
        return command_targets(root, targets.command, base_commit)
    return select_files(files_at(root, base_commit), targets.globs, targets.exclude)


def discover(spec: PipelineSpec, cwd: Path) -> Discovery:
    root = repo_root((cwd / spec.repo.path).resolve())
    commit = resolve_base(root, spec.repo.base)
    found = list_targets(root, spec.targets, commit)
    if not found:
        # A run would make an empty branch and exit 0, which CI reads as "all done".
        how = (
            "targets.command printed none"
            if spec.targets.command is not None
            else (
                f"targets.glob {', '.join(spec.targets.globs)} matched no file"
                + (
                    f" left by targets.exclude {', '.join(spec.targets.exclude)}"
                    if spec.targets.exclude
                    else ""
                )
            )
        )
        raise TargetError(
            f"nothing to do at {spec.repo.base} ({commit[:12]}): {how}; check the spec's targets"
        )
    return Discovery(
        root=str(root),
        base=spec.repo.base,
        base_commit=commit,
        targets=found,
        shards=shard_targets(found, spec.targets.group_by, spec.targets.shard_size),
    )


def spec_hash(spec: PipelineSpec) -> str:
    canonical = json.dumps(work_definition(spec), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def pipeline_id(spec: PipelineSpec, base_commit: str) -> str:
    """The same spec (what it does, not how fast or how much it may spend) on the same base
    commit gets the same id, so running the same command again resumes that pipeline."""
    return f"pipeline-{spec.name}-{spec_hash(spec)[:10]}-{base_commit[:12]}"
