"""The git side of a pipeline run: worktrees, shard patches, the output branch and its
trailers. Plain functions, each safe to run again after a lost worker (the activities over
them retry)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

PIPELINE_TRAILER = "Tempi-Pipeline"
SHARD_TRAILER = "Tempi-Shard"
# Commits on the output branch are made by tempi, not by whoever runs it.
COMMITTER = {
    "GIT_AUTHOR_NAME": "tempi pipeline",
    "GIT_AUTHOR_EMAIL": "tempi@localhost",
    "GIT_COMMITTER_NAME": "tempi pipeline",
    "GIT_COMMITTER_EMAIL": "tempi@localhost",
}


class GitWorkError(Exception):
    """A git step failed; the message says which and what git said."""


def git(
    cwd: str | Path,
    *args: str,
    check: bool = True,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> str:
    return git_bytes(cwd, *args, check=check, stdin=stdin, env=env).decode(errors="replace")


def git_ok(
    cwd: str | Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> bool:
    """Whether `git -C cwd ARGS` succeeds (`merge-base --is-ancestor`, an `apply` that may not)."""
    return _run(cwd, args, stdin, env).returncode == 0


def _run(
    cwd: str | Path, args: tuple[str, ...], stdin: bytes | None, env: dict[str, str] | None
) -> subprocess.CompletedProcess[bytes]:
    full = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", LC_ALL="C", **COMMITTER)
    full.update(env or {})
    return subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, env=full, input=stdin, timeout=300, check=False
    )


def git_bytes(
    cwd: str | Path,
    *args: str,
    check: bool = True,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> bytes:
    """`git -C cwd ARGS`, its output as bytes (a patch is not always UTF-8); `env` adds to
    (or overrides) the environment, e.g. GIT_INDEX_FILE or a commit's author."""
    proc = _run(cwd, args, stdin, env)
    if check and proc.returncode != 0:
        raise GitWorkError(
            f"git {' '.join(args[:2])} in {cwd}: {proc.stderr.decode(errors='replace').strip()}"
        )
    return proc.stdout


def _is_worktree(path: Path) -> bool:
    """A checkout git still knows. One whose repository lost its record of it (a new clone
    at the same place, a `git worktree prune`) is not: it is made again."""
    if not (path / ".git").exists():
        return False
    return git(path, "rev-parse", "--git-dir", check=False) != ""


def git_dirs(worktree: str | Path) -> tuple[Path, Path]:
    """(git directory, common directory) of a checkout, read from the files git itself reads
    (`.git`, and a linked worktree's `commondir`) instead of asking a git process: a shard's
    activities need them several times each. Anything unusual is left to `git rev-parse`."""
    dot = Path(worktree) / ".git"
    try:
        if dot.is_dir():
            return dot.absolute(), dot.absolute()
        text = dot.read_text()
        if text.startswith("gitdir: "):
            git_dir = Path(worktree).absolute() / text[len("gitdir: ") :].strip()
            common = git_dir / (git_dir / "commondir").read_text().strip()
            if git_dir.is_dir() and common.is_dir():
                return Path(os.path.normpath(git_dir)), Path(os.path.normpath(common))
    except OSError:
        pass
    out = git(worktree, "rev-parse", "--path-format=absolute", "--absolute-git-dir", "--git-common-dir")
    git_dir_line, common_line = out.splitlines()[:2]
    return Path(git_dir_line), Path(common_line)


def clear_stale_locks(worktree: str | Path) -> None:
    """Remove the lock files a git command killed with its worker leaves in a worktree (its
    index, its HEAD, its branch), which would make every retry fail. Only one activity works
    in a pipeline's worktree at a time, so a lock found at the start of one is stale."""
    git_dir, common = git_dirs(worktree)
    locks = [git_dir / "index.lock", git_dir / "HEAD.lock"]
    with contextlib.suppress(OSError):
        head = (git_dir / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            locks.append(common / f"{head[len('ref: ') :]}.lock")
    for lock in locks:
        lock.unlink(missing_ok=True)


@contextlib.contextmanager
def worktree_changes(repo_root: str) -> Iterator[None]:
    """One `git worktree add/remove/prune` at a time in a repository: git keeps every shard's
    worktree record under `.git/worktrees/work*`, and two shards adding theirs at once race
    for the same name ("failed to read .git/worktrees/work/commondir")."""
    _, common = git_dirs(repo_root)
    with open(common / "tempi-worktrees.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def shard_worktree(state_dir: str, shard_id: str) -> Path:
    return Path(state_dir) / "shards" / shard_id / "work"


def prepare_shard_worktree(
    repo_root: str, base_commit: str, state_dir: str, shard_id: str, spare: str | None = None
) -> str:
    """A clean checkout of the base commit for one shard. A shard that starts again (its
    session lost) starts from the base commit, not from what its last attempt left. `spare`:
    a committed shard whose worktree is no longer needed; it moves here and is reset, which
    touches only what that shard changed instead of writing every file of the tree again,
    and leaves one worktree fewer for the run's end to remove."""
    path = shard_worktree(state_dir, shard_id)
    if not _is_worktree(path):
        if path.exists():
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        donor = shard_worktree(state_dir, spare) if spare else None
        with worktree_changes(repo_root):
            # A move git refuses (a worktree it forgot, one with submodules) makes a new one.
            moved = (
                donor is not None
                and (donor / ".git").exists()
                and git_ok(repo_root, "worktree", "move", str(donor), str(path))
            )
            if not moved:
                git(repo_root, "worktree", "prune")
                # Only git's record under the lock: the files are written below, beside
                # other shards' (a big tree takes a second or more).
                git(repo_root, "worktree", "add", "-q", "--no-checkout", "--detach", str(path), base_commit)
    clear_stale_locks(path)
    git(path, "reset", "-q", "--hard", base_commit)
    git(path, "clean", "-q", "-fdx")
    return str(path)


def save_shard_patch(
    cwd: str, base_commit: str, state_dir: str, shard_id: str, keep_out: list[str] | None = None
) -> str:
    """Everything the shard changed against the base commit (new files too), as a patch file;
    `keep_out`: pathspecs of what setup gave the worktree, no part of the shard's change."""
    clear_stale_locks(cwd)
    git(cwd, "add", "-A", "--", ".", *(keep_out or []))
    patch = git(cwd, "diff", "--cached", "--binary", base_commit)
    path = Path(state_dir) / "shards" / shard_id / "shard.patch"
    path.write_text(patch)
    return str(path)


def output_worktree(state_dir: str) -> Path:
    return Path(state_dir) / "output"


def prepare_output(repo_root: str, base_commit: str, branch: str, state_dir: str) -> str:
    """The output branch (made at the base commit if new) checked out in its own worktree."""
    path = output_worktree(state_dir)
    if _is_worktree(path):
        return str(path)
    exists = git(repo_root, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False).strip()
    if not exists:
        git(repo_root, "branch", branch, base_commit)
    if path.exists():
        shutil.rmtree(path)  # a checkout its repository forgot; the branch keeps the commits
    git(repo_root, "worktree", "prune")
    try:
        git(repo_root, "worktree", "add", "-q", str(path), branch)
    except GitWorkError as err:
        raise GitWorkError(
            f"output.branch {branch}: cannot check it out for the pipeline ({err}); "
            "if it is checked out elsewhere, switch that checkout to another branch"
        ) from None
    return str(path)


def committed_shards(worktree: str, base_commit: str, pipeline_id: str) -> dict[str, str]:
    """Shard id -> commit for this pipeline's commits on the output branch since the base,
    read from their trailers, so a run whose Temporal state is gone skips them."""
    return _shard_commits(worktree, pipeline_id, f"{base_commit}..HEAD")


def _shard_commits(worktree: str, pipeline_id: str, *revs: str) -> dict[str, str]:
    """Shard id -> commit for this pipeline's commits among `git log REVS`."""
    fmt = (
        f"%H%x00%(trailers:key={PIPELINE_TRAILER},valueonly)%x00%(trailers:key={SHARD_TRAILER},valueonly)%x1e"
    )
    out = git(worktree, "log", f"--format={fmt}", *revs)
    found: dict[str, str] = {}
    for record in out.split("\x1e"):
        parts = record.strip("\n").split("\x00")
        if len(parts) != 3:
            continue
        commit, pipeline, shards = (p.strip() for p in parts)
        if pipeline != pipeline_id:
            continue
        # A squashed branch has one commit with a Tempi-Shard trailer per shard.
        for shard in shards.splitlines():
            if shard.strip():
                found.setdefault(shard.strip(), commit)
    return found


def integrate_many(
    worktree: str,
    pipeline_id: str,
    patches: list[tuple[str, str, str]],
    keep: list[str] | None = None,
) -> tuple[list[str], str | None]:
    """Commit shards' patches on the output branch in order, each with its trailers:
    `patches` holds (shard id, patch file, message). Returns the commits of those committed,
    and why the next one's patch does not apply on the branch's head (None when all did);
    the ones after it are not tried. Integrations on the branch go one at a time, so what an
    earlier attempt of this one committed is among its last len(patches) commits: a retry
    finds those by their trailers instead of committing twice (reading the whole branch
    each time grew with the shard count). `keep`: pathspecs of what setup made in the
    checkout, which stays."""
    clear_stale_locks(worktree)
    last = f"-{len(patches)}"
    done = _shard_commits(worktree, pipeline_id, last, "HEAD")
    todo = [p for p in patches if p[0] not in done]
    conflict = None
    if todo:
        # What a killed attempt left half applied goes.
        git(worktree, "reset", "-q", "--hard", "HEAD")
        git(worktree, "clean", "-q", "-fd", "--", ".", *(keep or []))
    for shard_id, patch_path, message in todo:
        conflict = _apply(worktree, patch_path)
        if conflict is not None:
            break
        text = f"{message}\n\n{PIPELINE_TRAILER}: {pipeline_id}\n{SHARD_TRAILER}: {shard_id}\n"
        git(worktree, "commit", "-q", "--allow-empty", "--no-verify", "-F", "-", stdin=text.encode())
    if todo:
        done = _shard_commits(worktree, pipeline_id, last, "HEAD")
    commits = []
    for shard_id, _, _ in patches:
        if shard_id not in done:
            break
        commits.append(done[shard_id])
    return commits, conflict


def _apply(worktree: str, patch_path: str) -> str | None:
    """Apply a patch to the checkout and its index; why it does not apply, or None."""
    if not Path(patch_path).read_bytes().strip():
        return None
    proc = subprocess.run(
        ["git", "-C", worktree, "apply", "--index", "--3way", patch_path],
        capture_output=True,
        check=False,
        timeout=300,
    )
    if proc.returncode == 0:
        return None
    git(worktree, "reset", "-q", "--hard", "HEAD")
    return proc.stderr.decode(errors="replace").strip()[-2000:]


def squash_output(
    worktree: str, base_commit: str, pipeline_id: str, shard_ids: list[str], message: str
) -> str:
    """Make the output branch one commit on the base: the same tree, the pipeline's trailer
    and one Tempi-Shard trailer per committed shard, so a later run still finds them. The
    branch moves in one step (a commit made aside, then `reset --soft`), so a retry after a
    lost worker finds one commit and leaves it."""
    clear_stale_locks(worktree)
    if int(git(worktree, "rev-list", "--count", f"{base_commit}..HEAD").strip()) <= 1:
        return git(worktree, "rev-parse", "HEAD").strip()
    trailers = "".join(f"{SHARD_TRAILER}: {shard}\n" for shard in shard_ids)
    text = f"{message}\n\n{PIPELINE_TRAILER}: {pipeline_id}\n{trailers}"
    tree = git(worktree, "rev-parse", "HEAD^{tree}").strip()
    commit = git(worktree, "commit-tree", tree, "-p", base_commit, "-F", "-", stdin=text.encode()).strip()
    git(worktree, "reset", "-q", "--soft", commit)
    return commit


def release_worktrees(repo_root: str, state_dir: str, done_shards: list[str]) -> None:
    """At the end of a run: the output worktree goes, so the branch can be checked out
    elsewhere (a rerun makes it again), and so do the worktrees of committed shards. A failed
    shard's worktree stays for a look at what it left. The checkouts are deleted and git
    forgets them in one `worktree prune`, instead of one `worktree remove` each."""
    paths = [output_worktree(state_dir), *(shard_worktree(state_dir, s) for s in done_shards)]
    with worktree_changes(repo_root):
        for path in paths:
            if (path / ".git").exists():
                shutil.rmtree(path)
        git(repo_root, "worktree", "prune")


def remove_worktree(path: Path) -> None:
    """Remove a pipeline's worktree and git's record of it; a checkout whose repository is
    gone (or forgot it) is just deleted."""
    common = git(path, "rev-parse", "--path-format=absolute", "--git-common-dir", check=False).strip()
    if common and _is_worktree(path):
        git(common, "worktree", "remove", "--force", str(path))
        git(common, "worktree", "prune")
    elif path.exists():
        shutil.rmtree(path)
