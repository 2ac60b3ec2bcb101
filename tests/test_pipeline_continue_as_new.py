"""A pipeline of many shards keeps each run's history bounded: once a run's history reaches
its budget (TEMPI_PIPELINE_HISTORY_EVENTS here, set low; Temporal's own suggestion in real
use) it lets the running shards finish and continues as new with every shard's state, so
the pipeline ends with every shard committed once. The 1,000-target run is
`python -m bench pipeline`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tempi.testing.pipeline_many import history_runs, make_many_targets, scenario
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.temporal_client import connect
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git

TARGETS = 24
BUDGET = 80


@pytest.mark.slow
async def test_a_long_pipeline_continues_as_new_and_commits_every_shard_once(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "pipeline-many", scenario(TARGETS))
    repo = make_many_targets(tmp_path / "repo", TARGETS, concurrency=3)
    env = tempi_env(home, temporal_address, TEMPI_PIPELINE_HISTORY_EVENTS=str(BUDGET))

    proc = run_tempi(
        ["pipeline", "run", "pipeline.yaml", "--json", "out/summary.json"], cwd=repo, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((repo / "out/summary.json").read_text())
    assert summary["counts"] == {"committed": TARGETS}
    # Each shard's one model turn was asked once, and committed once, across the runs.
    routes = Counter(r.route for r in scripted_server.requests_for("pipeline-many"))
    assert routes == Counter({f"m{i:04d}.py": 1 for i in range(TARGETS)})
    shards = git(repo, "log", "--format=%(trailers:key=Tempi-Shard,valueonly)", "main..tempi/many").split()
    assert sorted(shards) == sorted(s["id"] for s in summary["shards"])

    workflow_id = proc.stdout.split("workflow ")[1].split()[0]
    runs = await history_runs(await connect(temporal_address), workflow_id, summary["runs"])
    print(f"{TARGETS} shards, budget {BUDGET}: {len(runs)} runs, events {runs}")
    assert summary["runs"] >= 3
    # `list` shows the pipeline once, with its outcome, not once per run.
    listed = run_tempi(["pipeline", "list"], cwd=repo, env=env).stdout.splitlines()
    ours = [line.split("  ")[1] for line in listed if line.startswith(f"{workflow_id}  ")]
    assert ours == [f"done (exit 0): {TARGETS} committed"]
    # A run stops starting shards at the budget; the ones at work (3 at most) finish in it.
    assert max(runs) < BUDGET + 3 * 40
