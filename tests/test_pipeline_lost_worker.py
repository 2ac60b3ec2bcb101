"""A pipeline activity whose worker dies: it heartbeats while it works (so Temporal retries it
elsewhere within seconds) and its retry does the work once, even over the lock files a git
command killed mid-way leaves behind. Real git, the real activities under the SDK's activity
environment."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from temporalio.testing import ActivityEnvironment

from tempi.activities.pipeline.activities import integrate, verify
from tempi.pipeline import git_work
from tempi.pipeline.run_types import IntegrateInput, VerifyInput
from tests.pipeline_repo import git, make_repo


async def test_the_verify_activity_heartbeats_while_its_command_runs(tmp_path: Path) -> None:
    beats: list[object] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    outcome = await env.run(
        verify, VerifyInput(cwd=str(tmp_path), command="sleep 1; echo done", timeout_s=30)
    )
    assert outcome.passed and outcome.tail == "done"
    assert len(beats) >= 2


def _shard_patch(repo: Path, base: str, state: Path) -> str:
    work = git_work.prepare_shard_worktree(str(repo), base, str(state), "s1")
    (Path(work) / "src/main.py").write_text("from new_api import call\n")
    return git_work.save_shard_patch(work, base, str(state), "s1")


async def test_an_integration_killed_mid_commit_commits_once_on_retry(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "main").strip()
    state = tmp_path / "state"
    patch = _shard_patch(repo, base, state)
    output = git_work.prepare_output(str(repo), base, "tempi/out", str(state))
    # What `git commit` leaves when its process is killed: the index's lock and the branch's.
    git_dir = Path(git(Path(output), "rev-parse", "--absolute-git-dir").strip())
    (git_dir / "index.lock").write_text("")
    (repo / ".git/refs/heads/tempi").mkdir(parents=True, exist_ok=True)
    (repo / ".git/refs/heads/tempi/out.lock").write_text("")

    inp = IntegrateInput(
        worktree=output, base_commit=base, patch_path=patch, pipeline_id="p1", shard_id="s1", message="m"
    )
    env = ActivityEnvironment()
    first = await env.run(integrate, inp)
    assert first.commit and first.conflict is None
    again = await env.run(integrate, inp)
    assert again.commit == first.commit
    assert git(repo, "rev-list", "--count", f"{base}..tempi/out").strip() == "1"
    assert git(repo, "show", "tempi/out:src/main.py") == "from new_api import call\n"


async def test_a_shard_worktree_left_locked_starts_again_clean(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "main").strip()
    state = tmp_path / "state"
    work = Path(git_work.prepare_shard_worktree(str(repo), base, str(state), "s1"))
    (work / "src/main.py").write_text("half done\n")
    git_dir = Path(git(work, "rev-parse", "--absolute-git-dir").strip())
    (git_dir / "index.lock").write_text("")
    assert git_work.prepare_shard_worktree(str(repo), base, str(state), "s1") == str(work)
    assert git(work, "status", "--porcelain") == ""


async def test_worktrees_their_repository_forgot_are_made_again(tmp_path: Path) -> None:
    # As after a new clone at the same place (a CI job's checkout) with tempi's state kept.
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "main").strip()
    state = tmp_path / "state"
    patch = _shard_patch(repo, base, state)
    output = git_work.prepare_output(str(repo), base, "tempi/out", str(state))
    [commit], _ = git_work.integrate_many(output, "p1", [("s1", patch, "m")])
    for admin in (repo / ".git/worktrees").iterdir():
        shutil.rmtree(admin)

    assert git_work.prepare_output(str(repo), base, "tempi/out", str(state)) == output
    assert git_work.committed_shards(output, base, "p1") == {"s1": commit}
    work = git_work.prepare_shard_worktree(str(repo), base, str(state), "s1")
    assert git(Path(work), "rev-parse", "HEAD").strip() == base


async def test_shards_making_their_worktrees_at_once_all_get_one(tmp_path: Path) -> None:
    # Two shards' activities adding worktrees at once raced for git's record of them.
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "main").strip()
    shards = [f"s{i}" for i in range(40)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        made = list(
            pool.map(
                lambda s: git_work.prepare_shard_worktree(str(repo), base, str(tmp_path / "state"), s), shards
            )
        )
    for work in made:
        assert git(Path(work), "rev-parse", "HEAD").strip() == base
    assert git(repo, "worktree", "list").count("\n") == len(shards) + 1
