"""The CI templates in deploy/ci/ run for real against a local bare repository standing in
for the forge (see tests/ci_jobs.py for what is emulated and how): the job's own commands,
read from the YAML files, on the embedded Temporal server, with the state directory carried
between runs as the CI's cache carries it. A run stopped by its budget pushes nothing and
a re-run after the budget is raised resumes; a re-run after main moved puts the branch on the
new main; the merge (pull) request is asked for once."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.ci_jobs import (
    GITHUB_TOKEN,
    GITHUB_URL,
    GITLAB_TOKEN,
    CIRig,
    GitHubRunner,
    GitLabRunner,
    MergeRequestAPI,
    Remote,
    StepRun,
)
from tests.conftest import write_models_json
from tests.pipeline_repo import git
from tests.test_pipeline_budget import ALL_SHARDS_USD, TWO_SHARDS_USD, _routes, _spec
from tests.test_pipeline_run import VALUES, make_fixture, module

MODEL_KEY = "sk-ci-secret-key-4242"
BRANCH = "tempi/migrate"
SHARDS = sorted(VALUES)
ALL_ARTIFACTS = [".tempi-work/summary.json", ".tempi-work/summary.md", ".tempi-work/junit.xml"]


def _make_rig(
    tmp_path: Path, server: ScriptedLLMServer, scenario: str, spec: str, *, key_in_env: bool
) -> CIRig:
    """The project on the remote's main (its spec committed), and the runner's provider
    configuration: the scripted model, its key read from ANTHROPIC_API_KEY, which a GitLab
    CI/CD variable puts in the job's environment (`key_in_env`) and a GitHub secret only
    through the workflow's own `env:`."""
    server.add_scenario(scenario, {"routes": _routes()})
    agent = tmp_path / "runner-config"
    write_models_json(agent, server, scenario)
    models = json.loads((agent / "models.json").read_text())
    models["providers"]["mock"]["apiKey"] = "ANTHROPIC_API_KEY"
    (agent / "models.json").write_text(json.dumps(models))
    repo = make_fixture(tmp_path / "repo")
    (repo / "pipeline.yaml").write_text(spec)
    git(repo, "commit", "-q", "-am", "the pipeline's spec")
    remote = Remote.from_repo(repo, tmp_path)
    runner_env = {
        "PI_CODING_AGENT_DIR": str(agent),
        **({"ANTHROPIC_API_KEY": MODEL_KEY} if key_in_env else {}),
    }
    return CIRig(tmp_path, remote, runner_env)


@pytest.fixture
def rigs() -> Iterator[list[CIRig]]:
    made: list[CIRig] = []
    yield made
    for rig in made:
        rig.stop_leftover_server()


def _asked(server: ScriptedLLMServer, scenario: str, since: int = 0) -> Counter[str | None]:
    return Counter(r.route for r in server.requests_for(scenario)[since:])


def _branch_on(remote: Remote, main: str) -> list[str]:
    """The subjects of the output branch's commits on the remote, oldest first, after
    checking that it starts at `main` and that no commit is empty."""
    branch = remote.rev(f"refs/heads/{BRANCH}")
    assert branch is not None, "the output branch was not pushed"
    assert git(remote.bare, "merge-base", "main", BRANCH).strip() == main
    commits = git(remote.bare, "rev-list", "--reverse", f"main..{BRANCH}").split()
    for commit in commits:
        assert git(remote.bare, "diff-tree", "--no-commit-id", "--name-only", "-r", commit).strip(), commit
    for name, value in VALUES.items():
        assert git(remote.bare, "show", f"{BRANCH}:src/mods/{name}.py") == module(name, "new_api", value)
    return [git(remote.bare, "log", "-1", "--format=%s", c).strip() for c in commits]


def _merge_requests(api: MergeRequestAPI) -> list[dict]:
    assert all(call["token"] == GITLAB_TOKEN for call in api.calls)
    return [call["params"] for call in api.calls if call["method"] == "POST"]


def test_the_gitlab_job_stopped_by_its_budget_pushes_nothing_and_resumes_once_main_raises_it(
    tmp_path: Path, scripted_server: ScriptedLLMServer, rigs: list[CIRig]
) -> None:
    scenario = "ci-gitlab-budget"
    spec = _spec(f"max_cost_usd: {TWO_SHARDS_USD}")
    rig = _make_rig(tmp_path, scripted_server, scenario, spec, key_in_env=True)
    rigs.append(rig)
    remote = rig.remote
    with MergeRequestAPI("42").serving() as api:
        job = GitLabRunner(rig, api)

        stopped = job.run()
        assert stopped.returncode == 6, stopped.log
        assert "stopped by budget.max_cost_usd" in stopped.log
        assert remote.rev(f"refs/heads/{BRANCH}") is None and api.calls == []
        assert stopped.artifacts == ALL_ARTIFACTS  # the reports say why it stopped
        assert _asked(scripted_server, scenario) == {"alpha.py": 2, "beta.py": 2}
        # The key reached the model from the job's variables; the server was stopped before
        # the state went to the cache.
        auth = scripted_server.requests_for(scenario)[0].headers.get("authorization", "")
        assert auth == f"Bearer {MODEL_KEY}"
        assert not rig.server_left_running()
        asked = len(scripted_server.requests_for(scenario))

        main = remote.push_commit(
            {"pipeline.yaml": _spec(f"max_cost_usd: {ALL_SHARDS_USD}")}, "raise the budget"
        )
        finished = job.run()

        assert finished.returncode == 0, finished.log
        assert finished.artifacts == ALL_ARTIFACTS
        assert "4 shards: 4 committed, 2 from an earlier run" in finished.log
        # Only the shards not committed before ask the model.
        assert _asked(scripted_server, scenario, asked) == {"delta.py": 2, "gamma.py": 2}
        subjects = _branch_on(remote, main)
        assert sorted(subjects) == [f"migrate (migrate): src/mods/{n}.py" for n in SHARDS]
        [request] = _merge_requests(api)
        assert request["source_branch"] == BRANCH and request["target_branch"] == "main"
        assert request["title"] == "tempi pipeline: migrate"
        assert "4 shards: 4 committed" in request["description"]
        assert not rig.server_left_running()


def test_the_gitlab_job_rerun_after_main_moved_puts_the_branch_on_the_new_main(
    tmp_path: Path, scripted_server: ScriptedLLMServer, rigs: list[CIRig]
) -> None:
    scenario = "ci-gitlab-moved"
    spec = _spec(f"max_cost_usd: {ALL_SHARDS_USD}")
    rig = _make_rig(tmp_path, scripted_server, scenario, spec, key_in_env=True)
    rigs.append(rig)
    remote = rig.remote
    with MergeRequestAPI("42").serving() as api:
        job = GitLabRunner(rig, api)
        first = job.run()
        assert first.returncode == 0, first.log
        main = remote.rev("main")
        assert main and len(_branch_on(remote, main)) == 4
        assert len(_merge_requests(api)) == 1
        asked = len(scripted_server.requests_for(scenario))

        moved = remote.push_commit({"NEWS.md": "main moved\n"}, "main moves on")
        again = job.run()

        assert again.returncode == 0, again.log
        assert "4 shards: 4 committed, 4 from an earlier run" in again.log
        assert len(scripted_server.requests_for(scenario)) == asked  # no shard redone
        subjects = _branch_on(remote, moved)
        assert sorted(subjects) == [f"migrate (migrate): src/mods/{n}.py" for n in SHARDS]
        assert git(remote.bare, "show", f"{BRANCH}:NEWS.md") == "main moved\n"
        # The open merge request is found and not asked for again.
        assert len(_merge_requests(api)) == 1
        looked = [c["params"] for c in api.calls if c["method"] == "GET"]
        assert looked == [{"state": "opened", "source_branch": BRANCH}] * 2
        assert not rig.server_left_running()


def _outcomes(steps: list[StepRun]) -> dict[str, str]:
    return {s.name: s.outcome for s in steps}


def test_the_github_job_pushes_the_branch_and_opens_one_pull_request_once_its_budget_allows(
    tmp_path: Path, scripted_server: ScriptedLLMServer, rigs: list[CIRig]
) -> None:
    scenario = "ci-github"
    spec = _spec(f"max_cost_usd: {TWO_SHARDS_USD}")
    rig = _make_rig(tmp_path, scripted_server, scenario, spec, key_in_env=False)
    rigs.append(rig)
    remote = rig.remote
    job = GitHubRunner(rig, secrets={"ANTHROPIC_API_KEY": MODEL_KEY})

    # Stopped by the budget: the run step fails the job, no pull request, the state is saved.
    stopped = _outcomes(job.run())
    assert stopped["Run the pipeline"] == "failure", job.logs("Run the pipeline")
    assert stopped["Open a pull request from the output branch"] == "skipped"
    assert stopped["Stop the embedded server"] == stopped["Save the pipeline's state"] == "success"
    assert remote.rev(f"refs/heads/{BRANCH}") is None and job.gh_calls() == []
    assert "stopped by budget.max_cost_usd" in job.summary.read_text()
    assert _asked(scripted_server, scenario) == {"alpha.py": 2, "beta.py": 2}
    auth = scripted_server.requests_for(scenario)[0].headers.get("authorization", "")
    assert auth == f"Bearer {MODEL_KEY}"  # from the repository secret, through the workflow's env
    assert not rig.server_left_running()
    asked = len(scripted_server.requests_for(scenario))

    main = remote.push_commit({"pipeline.yaml": _spec(f"max_cost_usd: {ALL_SHARDS_USD}")}, "raise the budget")
    finished = _outcomes(job.run())
    assert set(finished.values()) == {"success"}, job.logs()
    assert _asked(scripted_server, scenario, asked) == {"delta.py": 2, "gamma.py": 2}
    assert len(_branch_on(remote, main)) == 4
    assert "4 shards: 4 committed, 2 from an earlier run" in job.summary.read_text()
    assert job.uploaded == ["junit.xml", "junit.xml"]
    calls = job.gh_calls()
    assert all(c["token"] == GITHUB_TOKEN and c["origin"] == GITHUB_URL for c in calls)
    [create] = [c for c in calls if c["args"][:2] == ["pr", "create"]]
    args = create["args"]
    assert args[args.index("--head") + 1] == BRANCH and args[args.index("--base") + 1] == "main"
    assert args[args.index("--title") + 1] == "tempi pipeline: migrate"
    assert "4 shards: 4 committed" in create["body"]
    assert not rig.server_left_running()
    asked = len(scripted_server.requests_for(scenario))

    # Run again: the cached state has the finished pipeline, so nothing is asked again, and
    # the open pull request is updated, not opened twice.
    again = _outcomes(job.run())
    assert set(again.values()) == {"success"}, job.logs()
    assert len(scripted_server.requests_for(scenario)) == asked
    calls = job.gh_calls()
    assert [c["args"][:2] for c in calls].count(["pr", "create"]) == 1
    assert calls[-1]["args"][:2] == ["pr", "edit"]
    assert len(_branch_on(remote, main)) == 4
