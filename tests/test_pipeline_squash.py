"""`final: {commits: squash}` in a real `tempi pipeline run`: the output branch gets one commit
with the pipeline's trailer and a Tempi-Shard trailer per committed shard, and a new run
still finds those shards by the trailers and asks the model only about the failed one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git
from tests.test_pipeline_run import SPEC, VALUES, _routes, make_fixture, module


@pytest.mark.slow
def test_squash_makes_one_commit_with_a_trailer_per_shard_and_resumes_by_them(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "pipeline-squash", {"routes": _routes()})
    repo = make_fixture(tmp_path / "repo")
    (repo / "squash.yaml").write_text(
        SPEC.replace(
            "final: {verify: python3 check.py}", "final: {verify: python3 check.py, commits: squash}"
        )
    )
    env = tempi_env(home, temporal_address)
    args = ["pipeline", "run", "squash.yaml"]

    proc = run_tempi(args, cwd=repo, env=env, timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "4 shards: 3 committed, 1 failed; final verify passed" in proc.stdout
    assert git(repo, "rev-list", "--count", "main..tempi/migrate").strip() == "1"
    message = git(repo, "log", "-1", "--format=%B", "tempi/migrate")
    assert message.startswith("migrate (migrate): 3 shard(s)\n"), message
    assert message.count("Tempi-Pipeline: pipeline-migrate-") == 1
    assert message.count("Tempi-Shard: ") == 3
    for name, value in VALUES.items():
        api = "old_api" if name == "delta" else "new_api"
        assert git(repo, "show", f"tempi/migrate:src/mods/{name}.py") == module(name, api, value)
    asked = len(scripted_server.requests_for("pipeline-squash"))

    fresh = run_tempi([*args, "--fresh"], cwd=repo, env=env, timeout=180)
    assert fresh.returncode == 1, fresh.stdout + fresh.stderr
    assert fresh.stdout.count("(committed by an earlier run)") == 3
    routes = {r.route for r in scripted_server.requests_for("pipeline-squash")[asked:]}
    assert routes == {"delta.py"}
    assert git(repo, "rev-list", "--count", "main..tempi/migrate").strip() == "1"
    assert git(repo, "log", "-1", "--format=%B", "tempi/migrate").count("Tempi-Shard: ") == 3
