"""`final.commits: squash` on real git: the output branch becomes one commit with a
Tempi-Shard trailer per shard, a later run still finds every shard by those trailers, and a
retry after a lost worker squashes nothing twice."""

from __future__ import annotations

from pathlib import Path

from tempi.pipeline import git_work
from tests.pipeline_repo import git, make_repo


def _commit_shards(repo: Path, state: Path, base: str, shards: list[str]) -> str:
    output = git_work.prepare_output(str(repo), base, "tempi/out", str(state))
    for shard in shards:
        work = git_work.prepare_shard_worktree(str(repo), base, str(state), shard)
        (Path(work) / f"{shard}.txt").write_text(f"{shard}\n")
        patch = git_work.save_shard_patch(work, base, str(state), shard)
        commits, conflict = git_work.integrate_many(output, "p1", [(shard, patch, f"shard {shard}")])
        assert len(commits) == 1 and conflict is None
    return output


def test_a_squashed_branch_is_one_commit_whose_trailers_name_every_shard(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "main").strip()
    output = _commit_shards(repo, tmp_path / "state", base, ["s1", "s2", "s3"])
    tree = git(repo, "rev-parse", "tempi/out^{tree}")

    head = git_work.squash_output(output, base, "p1", ["s1", "s2", "s3"], "migrate: 3 shards")

    assert git(repo, "rev-list", "--count", f"{base}..tempi/out").strip() == "1"
    assert git(repo, "rev-parse", "tempi/out").strip() == head
    assert git(repo, "rev-parse", "tempi/out^{tree}") == tree
    message = git(repo, "log", "-1", "--format=%B", "tempi/out")
    assert message.startswith("migrate: 3 shards\n")
    assert "Tempi-Pipeline: p1\nTempi-Shard: s1\nTempi-Shard: s2\nTempi-Shard: s3\n" in message
    assert git_work.committed_shards(output, base, "p1") == {"s1": head, "s2": head, "s3": head}
    assert git(Path(output), "status", "--porcelain") == ""
    # A retry (the worker died after the branch moved) leaves the one commit as it is.
    assert git_work.squash_output(output, base, "p1", ["s1", "s2", "s3"], "migrate: 3 shards") == head


def test_a_shard_committed_after_a_squash_squashes_with_the_others(tmp_path: Path) -> None:
    # A later run (a failed shard run again) commits on top of the squashed commit.
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "main").strip()
    state = tmp_path / "state"
    output = _commit_shards(repo, state, base, ["s1", "s2"])
    git_work.squash_output(output, base, "p1", ["s1", "s2"], "first")
    _commit_shards(repo, state, base, ["s3"])

    head = git_work.squash_output(output, base, "p1", ["s1", "s2", "s3"], "whole")

    assert git(repo, "rev-list", "--count", f"{base}..tempi/out").strip() == "1"
    assert set(git_work.committed_shards(output, base, "p1")) == {"s1", "s2", "s3"}
    assert git(repo, "show", f"{head}:s3.txt") == "s3\n"
