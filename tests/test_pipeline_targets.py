"""A pipeline's targets and shards, found at the base commit of a real git repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from tempi.pipeline.globs import excluded, matches
from tempi.pipeline.loading import parse_spec
from tempi.pipeline.spec import PipelineSpec
from tempi.pipeline.targets import (
    TargetError,
    discover,
    files_at,
    pipeline_id,
    resolve_base,
    shard_targets,
)
from tests.pipeline_repo import MODULES, git, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def _spec(targets: str, base: str = "main", extra: str = "") -> PipelineSpec:
    return parse_spec(
        f"version: 1\nname: t\nrepo: {{path: ., base: {base}}}\ntargets: {targets}\n"
        f"steps: [{{name: s, prompt: 'Migrate {{{{shard.files}}}}'}}]\n{extra}",
        "t.yaml",
    )


GLOB = '{glob: "src/**/*.py", exclude: ["src/vendor/**"]}'


def test_targets_are_the_base_commits_files_not_the_working_tree(repo: Path) -> None:
    (repo / "src/main.py").unlink()  # deleted but not committed: still a target at main
    found = discover(_spec(GLOB), repo)
    assert found.base_commit == git(repo, "rev-parse", "main").strip()
    # No src/app/later.py (only on the checked-out branch), no draft.py (uncommitted),
    # nothing under src/vendor (excluded), nothing outside src/.
    assert found.targets == MODULES
    assert [s.files for s in found.shards] == [[m] for m in MODULES]
    assert [s.index for s in found.shards] == [1, 2, 3, 4, 5, 6]


def test_the_checked_out_branch_as_base_brings_its_committed_files_only(repo: Path) -> None:
    found = discover(_spec(GLOB, base="HEAD"), repo)
    assert "src/app/later.py" in found.targets
    assert "src/app/draft.py" not in found.targets


def test_group_by_directory_keeps_a_shard_in_one_directory(repo: Path) -> None:
    found = discover(_spec('{glob: "src/**/*.py", exclude: [src/vendor], group_by: directory}'), repo)
    assert [(s.directory, s.files) for s in found.shards] == [
        ("src", ["src/main.py"]),
        ("src/app", ["src/app/billing.py", "src/app/orders.py", "src/app/users.py"]),
        ("src/lib", ["src/lib/cache.py", "src/lib/http.py"]),
    ]
    capped = discover(
        _spec('{glob: "src/**/*.py", exclude: [src/vendor], group_by: directory, max_per_shard: 2}'), repo
    )
    assert [s.files for s in capped.shards] == [
        ["src/main.py"],
        ["src/app/billing.py", "src/app/orders.py"],
        ["src/app/users.py"],
        ["src/lib/cache.py", "src/lib/http.py"],
    ]


def test_group_by_file_fills_shards_in_target_order() -> None:
    shards = shard_targets(MODULES, "file", 4)
    assert [s.files for s in shards] == [MODULES[:4], MODULES[4:]]
    assert shards[1].directory == ""  # src/lib and src: no directory in common
    assert shard_targets([], "file", 1) == []


def test_shard_ids_name_the_same_files_on_every_run() -> None:
    first = shard_targets(MODULES, "file", 1)
    again = shard_targets(MODULES, "file", 1)
    assert [s.id for s in first] == [s.id for s in again]
    assert len({s.id for s in first}) == 6
    # A new file before them renumbers the shards, but a shard's id follows its files.
    moved = shard_targets(["src/aaa.py", *MODULES], "file", 1)
    assert {s.files[0]: s.id for s in moved}["src/main.py"] == first[-1].id


def test_a_command_lists_the_targets(repo: Path) -> None:
    # `git grep` at the base commit: the draft and the feature branch's module use old_api
    # too, but are not in main.
    spec = _spec("{command: 'git grep -l old_api \"$TEMPI_PIPELINE_BASE\" -- src/app src/lib'}")
    found = discover(spec, repo)
    assert found.targets == [m for m in MODULES if m != "src/main.py"]
    unsorted = discover(_spec("{command: 'printf \"b.py\\n\\na.py\\n./b.py\\n\"'}"), repo)
    assert unsorted.targets == ["a.py", "b.py"]


def test_a_failing_command_says_so(repo: Path) -> None:
    with pytest.raises(TargetError, match=r"targets.command: exited with 3.*\n.*no such thing"):
        discover(_spec("{command: 'echo no such thing >&2; exit 3'}"), repo)


def test_targets_matching_nothing_stop_the_run_instead_of_making_an_empty_branch(repo: Path) -> None:
    with pytest.raises(TargetError, match=r"targets.glob src/\*\*/\*.rs matched no file; check the spec"):
        discover(_spec('{glob: "src/**/*.rs"}'), repo)
    with pytest.raises(TargetError, match=r"left by targets\.exclude src"):
        discover(_spec('{glob: "src/**/*.py", exclude: [src]}'), repo)
    with pytest.raises(TargetError, match=r"targets\.command printed none"):
        discover(_spec("{command: 'true'}"), repo)


def test_a_base_that_is_not_a_commit_names_the_key(repo: Path) -> None:
    with pytest.raises(TargetError, match=r"repo.base: 'mian' is not a commit"):
        resolve_base(repo, "mian")
    with pytest.raises(TargetError, match=r"repo.base: '--all' is not a commit"):
        resolve_base(repo, "--all")


def test_a_directory_outside_git_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match=r"repo.path: .* is not in a git repository"):
        discover(_spec(GLOB), tmp_path)


def test_files_at_skips_symlinks_and_submodules(repo: Path) -> None:
    (repo / "link.py").symlink_to("src/main.py")
    git(repo, "add", "link.py")
    git(repo, "commit", "-q", "-m", "link")
    assert "link.py" not in files_at(repo, "HEAD")


def test_the_pipeline_id_follows_the_work_and_the_base(repo: Path) -> None:
    main = git(repo, "rev-parse", "main").strip()
    feature = git(repo, "rev-parse", "feature").strip()
    spec = _spec(GLOB)
    same = parse_spec(  # other order, comments, a bigger budget, more concurrency: the same work
        "# again\nname: t\nversion: 1\nsteps: [{prompt: 'Migrate {{shard.files}}', name: s}]\n"
        f"targets: {GLOB}\nrepo: {{base: main}}\nconcurrency: 9\nbudget: {{max_cost_usd: 500}}\n",
        "t.yaml",
    )
    assert pipeline_id(spec, main) == pipeline_id(same, main)
    assert pipeline_id(spec, main).startswith("pipeline-t-")
    assert pipeline_id(spec, main).endswith(main[:12])
    assert pipeline_id(spec, feature) != pipeline_id(spec, main)
    other_prompt = _spec(GLOB).model_copy(
        update={"steps": [spec.steps[0].model_copy(update={"prompt": "x"})]}
    )
    assert pipeline_id(other_prompt, main) != pipeline_id(spec, main)


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("src/a.py", "src/**/*.py", True),
        ("src/x/y/a.py", "src/**/*.py", True),
        ("lib/src/a.py", "src/**/*.py", False),
        ("src/x/a.py", "src/*.py", False),
        ("a.py", "*.py", True),
        ("d/a.py", "*.py", False),
        ("d/a.py", "**/*.py", True),
        ("src/a1.py", "src/a?.py", True),
        ("src/a1.py", "src/a[0-9].py", True),
        ("src/ab.py", "src/a[!b].py", False),
        ("src/a.pyc", "src/*.py", False),
    ],
)
def test_glob_semantics(path: str, pattern: str, expected: bool) -> None:
    assert matches(path, pattern) is expected


def test_exclude_covers_a_directory_and_what_is_under_it() -> None:
    assert excluded("src/vendor/a/b.py", ["src/vendor"])
    assert excluded("src/vendor/a/b.py", ["src/vendor/**"])
    assert not excluded("src/vendored.py", ["src/vendor"])
