"""A pipeline run again after main moved: the base commit, and so the pipeline's id, is new,
and the output branch from the last run is put on the new main before any shard runs. A
shard whose commit still applies is not run again, one whose commit no longer applies is,
one whose change main already has is done, no commit is doubled or empty, and the branch and
`output.patch` keep main's newer commits."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git
from tests.test_pipeline_budget import _routes
from tests.test_pipeline_run import SPEC, make_fixture, module


def _workflow_id(stdout: str) -> str:
    return stdout.split("workflow ")[1].split()[0]


def _branch_commits(repo: Path) -> list[str]:
    return git(repo, "rev-list", "--reverse", "main..tempi/migrate").split()


def test_a_run_after_main_moved_rebases_the_branch_and_redoes_only_what_no_longer_applies(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "moving-base", {"routes": _routes()})
    repo = make_fixture(tmp_path / "repo")
    (repo / "pipeline.yaml").write_text(SPEC.replace("report:", "output: {patch: out/output.patch}\nreport:"))
    git(repo, "commit", "-q", "-am", "the spec writes a patch")
    env = tempi_env(home, temporal_address)
    args = ["pipeline", "run", "pipeline.yaml"]
    first = run_tempi(args, cwd=repo, env=env, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    assert len(_branch_commits(repo)) == 4
    asked = len(scripted_server.requests_for("moving-base"))

    # Main moves on: a file of its own, an edit to alpha's line that alpha's commit changes
    # too, and beta migrated by hand exactly as its shard did.
    (repo / "NEWS.md").write_text("main moved\n")
    (repo / "src/mods/alpha.py").write_text(
        module("alpha", "old_api", 1).replace("import call\n", "import call  # main's own\n", 1)
    )
    (repo / "src/mods/beta.py").write_text(module("beta", "new_api", 2))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "main moves on")
    main = git(repo, "rev-parse", "main").strip()

    again = run_tempi(args, cwd=repo, env=env, timeout=180)

    out = again.stdout + again.stderr
    assert again.returncode == 0, out
    assert "4 shards: 4 committed, 3 from an earlier run; final verify passed" in out
    routes = [r.route for r in scripted_server.requests_for("moving-base")[asked:]]
    assert routes == ["alpha.py", "alpha.py"]  # only the shard whose commit no longer applied
    # The branch is on the new main: gamma's and delta's commits carried over, alpha's made
    # again; beta's left out (main has it), and no commit is empty or there twice.
    assert git(repo, "merge-base", "main", "tempi/migrate").strip() == main
    commits = _branch_commits(repo)
    subjects = [git(repo, "log", "-1", "--format=%s", c).strip() for c in commits]
    assert sorted(subjects) == [f"migrate (migrate): src/mods/{n}.py" for n in ("alpha", "delta", "gamma")]
    new_id = _workflow_id(again.stdout)
    for commit in commits:
        assert git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", commit).strip(), commit
        trailers = git(repo, "log", "-1", "--format=%(trailers:key=Tempi-Pipeline,valueonly)", commit)
        assert trailers.strip() == new_id
    for name, value in (("alpha", 1), ("beta", 2), ("delta", 4), ("gamma", 3)):
        assert git(repo, "show", f"tempi/migrate:src/mods/{name}.py") == module(name, "new_api", value)
    assert git(repo, "show", "tempi/migrate:NEWS.md") == "main moved\n"
    # The patch is the branch's change for the new main: it applies there and undoes nothing.
    patch = (repo / "out/output.patch").read_text()
    assert "NEWS.md" not in patch and "src/mods/beta.py" not in patch
    check = subprocess.run(
        ["git", "apply", "--check", "out/output.patch"], cwd=repo, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
