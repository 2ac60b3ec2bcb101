"""The output branch on a base that moved: when the base commit is not on the branch (main
moved since the last run, so the pipeline has a new id), the branch's commits are replayed
on the new base before any shard runs, so the branch and `output.patch` never undo what
landed on main since.

A commit this pipeline's work made (its `Tempi-Pipeline:` trailer names the same spec name
and hash, whatever the base) is carried over with its trailer naming the new id, so its
shards count as committed; one that no longer applies is dropped and its shards run again;
one whose change the new base already has is dropped too, its shards done. Any other commit
(someone's fix on the branch) is replayed as it is, and one that does not apply stops the
run with what to do. The commits are made aside (a scratch index, `commit-tree`) and the
branch moves in one step at the end, so a retry after a lost worker finds it either where it
was or rebased."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel

from tempi.pipeline.git_work import PIPELINE_TRAILER, SHARD_TRAILER, GitWorkError, git, git_bytes, git_ok

ON_BASE = "shards-on-base.json"  # in the pipeline's state dir: shards the new base already has
_FIELDS = ["%H", "%P", "%T", "%an", "%ae", "%ad", "%s", "%B"]
_TRAILERS = [f"%(trailers:key={PIPELINE_TRAILER},valueonly)", f"%(trailers:key={SHARD_TRAILER},valueonly)"]


class _Commit(BaseModel):
    commit: str
    parent: str
    tree: str
    author: dict[str, str]
    subject: str
    message: str
    pipeline: str
    shards: list[str]


def same_work(pipeline_a: str, pipeline_b: str) -> bool:
    """Ids are `pipeline-NAME-SPECHASH-BASE`: the same work whatever the base commit."""
    return pipeline_a.rsplit("-", 1)[0] == pipeline_b.rsplit("-", 1)[0]


def _commits(worktree: str, fork: str) -> list[_Commit]:
    fmt = "%x00".join(_FIELDS + _TRAILERS) + "%x1e"
    out = git(
        worktree,
        "log",
        "--reverse",
        "--topo-order",
        "--no-merges",
        "--date=raw",
        f"--format={fmt}",
        f"{fork}..HEAD",
    )
    found = []
    for record in out.split("\x1e"):
        parts = record.lstrip("\n").split("\x00")
        if len(parts) != len(_FIELDS) + len(_TRAILERS):
            continue
        commit, parents, tree, name, email, date, subject, body, pipeline, shards = parts
        found.append(
            _Commit(
                commit=commit,
                parent=parents.split()[0],
                tree=tree,
                author={"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date},
                subject=subject,
                message=body,
                pipeline=pipeline.strip(),
                shards=[s.strip() for s in shards.splitlines() if s.strip()],
            )
        )
    return found


def rebase_output(worktree: str, base_commit: str, pipeline_id: str, state_dir: str) -> None:
    """Put the output branch (checked out in `worktree`) on `base_commit` if it is not on it."""
    on_base = Path(state_dir) / ON_BASE
    head = git(worktree, "rev-parse", "HEAD").strip()
    if git_ok(worktree, "merge-base", "--is-ancestor", base_commit, head):
        return
    fork = git(worktree, "merge-base", base_commit, head, check=False).strip()
    branch = git(worktree, "symbolic-ref", "--short", "-q", "HEAD", check=False).strip()
    if not fork:
        raise GitWorkError(
            f"output.branch {branch}: it shares no history with the base {base_commit[:12]}; "
            "delete it (`git branch -D`) or name another output.branch"
        )
    index = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip()) / "tempi-rebase.index"
    scratch = {"GIT_INDEX_FILE": str(index)}
    tip, tip_tree = base_commit, git(worktree, "rev-parse", f"{base_commit}^{{tree}}").strip()
    git(worktree, "read-tree", tip, env=scratch)
    done_on_base: list[str] = []
    for c in _commits(worktree, fork):
        ours = bool(c.pipeline) and same_work(c.pipeline, pipeline_id)
        patch = git_bytes(worktree, "diff", "--binary", c.parent, c.commit)
        tree = tip_tree
        if patch.strip():
            if not git_ok(worktree, "apply", "--cached", "--3way", "-", stdin=patch, env=scratch):
                git(worktree, "read-tree", tip, env=scratch)  # what the conflict left goes
                if ours:
                    continue  # its shards run again on the new base
                raise GitWorkError(
                    f"output.branch {branch}: commit {c.commit[:12]} ({c.subject}) does not apply on the "
                    f"new base {base_commit[:12]}; rebase the branch on it yourself, or delete the branch "
                    "to start the pipeline over"
                )
            tree = git(worktree, "write-tree", env=scratch).strip()
            if tree == tip_tree:
                # The base has this change already: no empty commit; its shards are done.
                done_on_base += c.shards if ours else []
                continue
        message = c.message
        if ours:
            message = re.sub(
                rf"^{PIPELINE_TRAILER}: .*$", f"{PIPELINE_TRAILER}: {pipeline_id}", message, flags=re.M
            )
        tip = git(
            worktree, "commit-tree", tree, "-p", tip, "-F", "-", stdin=message.encode(), env=c.author
        ).strip()
        tip_tree = tree
    index.unlink(missing_ok=True)
    on_base.write_text(json.dumps(done_on_base))
    git(worktree, "reset", "-q", "--hard", tip)


def shards_on_base(state_dir: str) -> list[str]:
    """Shards whose change the base already had when the branch was put on it."""
    try:
        found: list[str] = json.loads((Path(state_dir) / ON_BASE).read_text())
    except (OSError, ValueError):
        return []
    return found
