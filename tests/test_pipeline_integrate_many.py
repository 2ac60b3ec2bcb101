"""Shards whose turn on the output branch has come together are committed in one activity:
in order, each with its trailers; one whose patch does not apply stops the batch there (the
pipeline re-runs it before trying the rest); a retry after a lost worker commits none twice.
Real git, the real activity under the SDK's activity environment."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import ActivityEnvironment

from tempi.activities.pipeline.activities import integrate_many
from tempi.pipeline import git_work
from tempi.pipeline.run_types import IntegrateManyInput, ShardPatch
from tests.pipeline_repo import git, make_repo


def _patch(repo: Path, base: str, state: Path, shard: str, path: str, text: str) -> ShardPatch:
    work = Path(git_work.prepare_shard_worktree(str(repo), base, str(state), shard))
    (work / path).write_text(text)
    patch = git_work.save_shard_patch(str(work), base, str(state), shard)
    return ShardPatch(shard_id=shard, patch_path=patch, message=f"shard {shard}")


def _subjects(repo: Path, base: str) -> list[str]:
    return git(repo, "log", "--reverse", "--format=%s", f"{base}..tempi/out").split("\n")[:-1]


async def test_ready_shards_commit_in_order_until_one_does_not_apply(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "main").strip()
    state = tmp_path / "state"
    shards = [
        _patch(repo, base, state, "s1", "src/main.py", "from new_api import call\n"),
        _patch(repo, base, state, "s2", "src/lib/http.py", "from new_api import call\n"),
        _patch(repo, base, state, "s3", "src/main.py", "from other_api import call\n"),  # s1's lines
        _patch(repo, base, state, "s4", "src/lib/cache.py", "from new_api import call\n"),
    ]
    output = git_work.prepare_output(str(repo), base, "tempi/out", str(state))
    inp = IntegrateManyInput(worktree=output, pipeline_id="p1", shards=shards)

    done = await ActivityEnvironment().run(integrate_many, inp)

    assert len(done.commits) == 2 and done.conflict and "src/main.py" in done.conflict
    assert done.head == git(repo, "rev-parse", "tempi/out").strip() == done.commits[1]
    assert _subjects(repo, base) == ["shard s1", "shard s2"]
    assert git_work.committed_shards(output, base, "p1") == {"s1": done.commits[0], "s2": done.commits[1]}
    assert git(Path(output), "status", "--porcelain") == ""  # s3's attempt left nothing behind
    # The rest go on once the conflicting shard is dealt with.
    rest = await ActivityEnvironment().run(integrate_many, inp.model_copy(update={"shards": shards[3:]}))
    assert rest.conflict is None and _subjects(repo, base) == ["shard s1", "shard s2", "shard s4"]


async def test_a_batch_retried_after_a_lost_worker_commits_each_shard_once(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "main").strip()
    state = tmp_path / "state"
    shards = [
        _patch(repo, base, state, f"s{i}", f"src/app/{name}.py", f"# {name} on new_api\n")
        for i, name in enumerate(["billing", "orders", "users"], 1)
    ]
    output = git_work.prepare_output(str(repo), base, "tempi/out", str(state))
    # What an attempt killed after its second commit leaves: two commits, and the third
    # shard's patch half applied in the checkout.
    first = await ActivityEnvironment().run(
        integrate_many, IntegrateManyInput(worktree=output, pipeline_id="p1", shards=shards[:2])
    )
    (Path(output) / "src/app/users.py").write_text("half\n")

    again = await ActivityEnvironment().run(
        integrate_many, IntegrateManyInput(worktree=output, pipeline_id="p1", shards=shards)
    )

    assert again.conflict is None and again.commits[:2] == first.commits and len(again.commits) == 3
    assert _subjects(repo, base) == ["shard s1", "shard s2", "shard s3"]
    assert git(repo, "show", "tempi/out:src/app/users.py") == "# users on new_api\n"
