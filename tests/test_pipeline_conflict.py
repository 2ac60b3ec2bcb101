"""Two shards of a real `tempi pipeline run` that change the same lines of one file: the
second one's patch does not apply on the output branch once the first is committed, so it
runs again in a fresh worktree at the branch's head and that patch is committed; a re-run
whose patch does not apply either is marked `conflict`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from temporalio.testing import ActivityEnvironment

from tempi.activities.pipeline.activities import integrate
from tempi.pipeline import git_work
from tempi.pipeline.run_types import IntegrateInput
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git
from tests.test_pipeline_run import write

# The targets are feature names, not files (`targets.command`); both shards add theirs to
# one list, at the same place.
SPEC = """\
version: 1
name: features
repo: {path: ., base: main}
model: mock/mock-model
targets: {command: "printf 'feature-one\\\\nfeature-two\\\\n'"}
steps:
  - {name: add, prompt: "Add {{shard.files}} to the end of features.txt.", max_turns: 4}
concurrency: 2
report: {json: out/summary.json, junit: out/junit.xml}
"""
START = "start\n"


def _fixture(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    (root / "features.txt").write_text(START)
    (root / "pipeline.yaml").write_text(SPEC)
    (root / ".gitignore").write_text("out/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a list of features")
    return root


def _routes(rerun_turns: list[dict]) -> dict:
    # feature-two first: its re-run writes both names, and a request is routed by the first
    # name its messages mention. Its turns are served in order, so the re-run (a new
    # session) gets the turns after the first run's.
    return {
        "feature-two": {
            "select": "sequential",
            "turns": [write("features.txt", START + "feature-two\n"), {"text": "Done."}, *rerun_turns],
        },
        "feature-one": {"turns": [write("features.txt", START + "feature-one\n"), {"text": "Done."}]},
    }


def _run(tmp_path: Path, temporal_address: str, server: ScriptedLLMServer, scenario: str, routes: dict):
    home = scripted_home(tmp_path, server, scenario, {"routes": routes})
    repo = _fixture(tmp_path / "repo")
    args = ["pipeline", "run", "pipeline.yaml", "--markdown", "out/summary.md"]
    proc = run_tempi(args, cwd=repo, env=tempi_env(home, temporal_address), timeout=180)
    print(proc.stdout, proc.stderr)
    return repo, proc


@pytest.mark.slow
def test_a_conflicting_shard_runs_again_on_the_branch_head_and_is_committed(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    both = START + "feature-one\nfeature-two\n"
    routes = _routes([write("features.txt", both), {"text": "Done, after feature-one."}])
    repo, proc = _run(tmp_path, temporal_address, scripted_server, "pipeline-conflict", routes)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "committed: feature-two (run again after a conflict)" in proc.stdout
    assert "2 shards: 2 committed" in proc.stdout

    assert git(repo, "show", "tempi/features:features.txt") == both
    log = git(repo, "log", "--format=%s", "main..tempi/features").splitlines()
    assert log == ["features (add): feature-two", "features (add): feature-one"]
    requests = scripted_server.requests_for("pipeline-conflict")
    assert Counter(r.route for r in requests) == {"feature-one": 2, "feature-two": 4}
    # The re-run is a new session: its first request holds the step's prompt and nothing of
    # the first run.
    rerun_first = [r for r in requests if r.route == "feature-two"][2]
    users = [m for m in rerun_first.body["messages"] if m["role"] == "user"]
    assert len(users) == 1 and "assistant" not in [m["role"] for m in rerun_first.body["messages"]]
    summary = json.loads((repo / "out/summary.json").read_text())
    two = next(s for s in summary["shards"] if s["files"] == ["feature-two"])
    assert two["state"] == "committed" and two["rerun"] is True and two["turns"] == 4
    assert "features: 2 shards: 2 committed" in (repo / "out/summary.md").read_text()


@pytest.mark.slow
def test_a_shard_whose_rerun_conflicts_too_is_marked_conflict(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    # While the re-run works, someone else commits on the output branch (its checkout is
    # three levels up from the shard's worktree): the re-run's patch meets a head it was
    # not made on.
    intruder = (
        "printf 'start\\nsomeone else\\n' > ../../../output/features.txt && "
        "git -C ../../../output -c user.name=x -c user.email=x@x commit -qam 'someone else'"
    )
    rerun = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": intruder}}]},
        write("features.txt", START + "feature-one\nfeature-two\n"),
        {"text": "Done."},
    ]
    repo, proc = _run(tmp_path, temporal_address, scripted_server, "pipeline-conflict-twice", _routes(rerun))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "conflict: feature-two" in proc.stdout
    assert "its patch does not apply on the output branch (nor did a re-run on its head)" in proc.stdout
    assert "2 shards: 1 committed, 1 conflict" in proc.stdout
    assert git(repo, "show", "tempi/features:features.txt") == START + "someone else\n"
    log = git(repo, "log", "--format=%s", "main..tempi/features").splitlines()
    assert log == ["someone else", "features (add): feature-one"]
    suite = ET.parse(repo / "out/junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failure = next(case for case in suite.iter("testcase") if case.find("failure") is not None)
    assert failure.get("name") == "feature-two"
    assert failure.find("failure").get("type") == "conflict"  # type: ignore[union-attr]


async def test_integration_of_a_patch_that_does_not_apply_names_the_head_it_met(tmp_path: Path) -> None:
    repo = _fixture(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    state = str(tmp_path / "state")
    patches = {}
    for shard in ("one", "two"):
        work = Path(git_work.prepare_shard_worktree(str(repo), base, state, shard))
        (work / "features.txt").write_text(START + f"feature-{shard}\n")
        patches[shard] = git_work.save_shard_patch(str(work), base, state, shard)
    output = git_work.prepare_output(str(repo), base, "tempi/features", state)
    env = ActivityEnvironment()

    def inp(shard: str) -> IntegrateInput:
        return IntegrateInput(
            worktree=output,
            base_commit=base,
            patch_path=patches[shard],
            pipeline_id="p",
            shard_id=shard,
            message=shard,
        )

    first = await env.run(integrate, inp("one"))
    second = await env.run(integrate, inp("two"))
    assert first.commit and second.commit is None
    assert second.head == first.commit and second.conflict
    # The branch and its checkout are as the first commit left them.
    assert git(Path(output), "status", "--porcelain") == ""
    assert (Path(output) / "features.txt").read_text() == START + "feature-one\n"
