"""Budgets of a real `tempi pipeline run`: a run that reaches `budget.max_cost_usd` or
`budget.deadline` starts no new shard and exits 6, and the same command with a larger budget
goes on with the shards left, never asking the model again about a committed one."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git
from tests.test_pipeline_run import SPEC, VALUES, make_fixture, module, write

# The scripted model's default usage (100 tokens in, 20 out) at the fixture's prices costs
# $0.0006 an answer, so a shard (an edit and a "Done.") costs $0.0012.
TWO_SHARDS_USD = 0.002
ALL_SHARDS_USD = 0.01


def _routes() -> dict:
    return {
        f"{name}.py": {
            "turns": [write(f"src/mods/{name}.py", module(name, "new_api", value)), {"text": "Done."}]
        }
        for name, value in VALUES.items()
    }


def _spec(budget: str) -> str:
    return SPEC.replace("concurrency: 2", f"concurrency: 1\nbudget: {{{budget}}}")


@pytest.mark.slow
def test_a_cost_budget_stops_the_run_and_a_larger_one_finishes_it(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "pipeline-budget", {"routes": _routes()})
    repo = make_fixture(tmp_path / "repo")
    env = tempi_env(home, temporal_address)
    # The spec stays out of the commit: the base commit, and so the pipeline, stays the same.
    spec = repo / "budget.yaml"
    spec.write_text(_spec(f"max_cost_usd: {TWO_SHARDS_USD}"))
    args = ["pipeline", "run", "budget.yaml", "--json", "out/summary.json"]

    stopped = run_tempi(args, cwd=repo, env=env, timeout=180)
    out = stopped.stdout
    assert stopped.returncode == 6, out + stopped.stderr
    assert "not enforced" not in stopped.stderr
    assert "4 shards: 2 committed, 2 not started; stopped by budget.max_cost_usd" in out
    assert "the same command run again with a larger budget.max_cost_usd" in out
    assert "goes on with the 2 shards left" in out
    assert Counter(r.route for r in scripted_server.requests_for("pipeline-budget")) == {
        "alpha.py": 2,
        "beta.py": 2,
    }
    summary = json.loads((repo / "out/summary.json").read_text())
    assert summary["exit_code"] == 6 and summary["stopped_by"] == "budget.max_cost_usd"
    assert summary["cost_usd"] >= TWO_SHARDS_USD
    assert summary["final_verify"] is None  # the branch is not whole yet
    assert git(repo, "log", "--format=%H", "main..tempi/migrate").count("\n") == 2

    # The same budget again: nothing more is spent.
    again = run_tempi(args, cwd=repo, env=env, timeout=120)
    assert again.returncode == 6, again.stdout + again.stderr
    assert "stopped by budget.max_cost_usd" in again.stdout
    assert len(scripted_server.requests_for("pipeline-budget")) == 4

    spec.write_text(_spec(f"max_cost_usd: {ALL_SHARDS_USD}"))
    finished = run_tempi(args, cwd=repo, env=env, timeout=180)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "4 shards: 4 committed, 2 from an earlier run; final verify passed" in finished.stdout
    assert Counter(r.route for r in scripted_server.requests_for("pipeline-budget")) == {
        route: 2 for route in ("alpha.py", "beta.py", "delta.py", "gamma.py")
    }
    log = git(repo, "log", "--format=%s", "main..tempi/migrate").splitlines()
    assert log == [f"migrate (migrate): src/mods/{name}.py" for name in ("gamma", "delta", "beta", "alpha")]
    # The cost counts both runs.
    summary = json.loads((repo / "out/summary.json").read_text())
    assert summary["cost_usd"] >= 4 * 0.0012 - 1e-9 and summary["stopped_by"] is None
