"""The output branch put on a moved base, on real git: a squashed commit of this pipeline's
work is carried over and names the new id, someone's own commit on the branch keeps its
author, a retry after the branch moved changes nothing, and a commit of someone's that no
longer applies stops the run with what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tempi.pipeline import git_work
from tempi.pipeline.rebase import rebase_output
from tests.pipeline_repo import git, make_repo


def _pid(base: str) -> str:
    return f"pipeline-migrate-0123456789-{base[:12]}"


def _branch_on_old_base(tmp_path: Path) -> tuple[Path, str, str]:
    """A branch with a squashed commit of the pipeline's and a commit of someone's on main's
    first commit, then a commit on main; returns the repo, the old and the new base."""
    repo = make_repo(tmp_path / "repo")
    git(repo, "checkout", "-q", "main")
    old = git(repo, "rev-parse", "main").strip()
    output = git_work.prepare_output(str(repo), old, "tempi/out", str(tmp_path / "old"))
    (Path(output) / "src/main.py").write_text("from new_api import call\n")
    git(Path(output), "commit", "-q", "-am", f"migrate\n\nTempi-Pipeline: {_pid(old)}\nTempi-Shard: s1\n")
    (Path(output) / "NOTES.md").write_text("a reviewer's note\n")
    git(Path(output), "add", "NOTES.md")
    git(Path(output), "-c", "user.name=Ada", "-c", "user.email=ada@x", "commit", "-q", "-m", "a note")
    git_work.release_worktrees(str(repo), str(tmp_path / "old"), [])
    (repo / "README.md").write_text("main moved\n")
    git(repo, "commit", "-q", "-am", "main moves on")
    return repo, old, git(repo, "rev-parse", "main").strip()


def test_the_pipelines_commits_and_someones_own_go_on_the_new_base(tmp_path: Path) -> None:
    repo, _old, new = _branch_on_old_base(tmp_path)
    state = str(tmp_path / "new")
    output = git_work.prepare_output(str(repo), new, "tempi/out", state)

    rebase_output(output, new, _pid(new), state)

    assert git(repo, "merge-base", "main", "tempi/out").strip() == new
    assert git_work.committed_shards(output, new, _pid(new)) == {
        "s1": git(repo, "rev-parse", "tempi/out~1").strip()
    }
    assert git(repo, "log", "-1", "--format=%an %s", "tempi/out").strip() == "Ada a note"
    assert git(repo, "show", "tempi/out:README.md") == "main moved\n"
    head = git(repo, "rev-parse", "tempi/out").strip()
    rebase_output(output, new, _pid(new), state)  # a retry after the branch moved
    assert git(repo, "rev-parse", "tempi/out").strip() == head


def test_someones_commit_that_no_longer_applies_stops_with_what_to_do(tmp_path: Path) -> None:
    repo, _old, _new = _branch_on_old_base(tmp_path)
    (repo / "NOTES.md").write_text("main's own notes\n")
    git(repo, "add", "NOTES.md")
    git(repo, "commit", "-q", "-m", "notes on main")
    new = git(repo, "rev-parse", "main").strip()
    before = git(repo, "rev-parse", "tempi/out").strip()
    output = git_work.prepare_output(str(repo), new, "tempi/out", str(tmp_path / "new"))

    with pytest.raises(git_work.GitWorkError, match=r"\(a note\) does not apply on the new base .*yourself"):
        rebase_output(output, new, _pid(new), str(tmp_path / "new"))

    assert git(repo, "rev-parse", "tempi/out").strip() == before
