"""A `tempi pipeline run` killed in the middle, then the same command again: the pipeline goes
on where it was. With the worker inside the killed process, the run resumes on Temporal's
state (the verify that was running is retried within its heartbeat timeout); with the dev
server's database gone too, it starts again and finds the committed shards by their git
trailers. Either way no commit is doubled and no committed shard is asked of the model again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.service import read_info
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git
from tests.test_pipeline_budget import _routes
from tests.test_pipeline_run import SPEC, make_fixture

pytestmark = pytest.mark.slow

ARGS = ["pipeline", "run", "kill.yaml"]
EACH_SHARD_ONCE = {route: 2 for route in ("alpha.py", "beta.py", "delta.py", "gamma.py")}


def _spec(tmp_path: Path) -> str:
    """The fixture's spec, one shard at a time, whose verify of the third shard (delta) marks
    that it started and then waits, the first time, until the test releases it: the moment
    to kill the run, with two shards committed and an activity at work."""
    started, release = tmp_path / "verify-started", tmp_path / "verify-release"
    wait = (
        f"if grep -q new_api src/mods/delta.py && [ ! -e {started} ]; then touch {started}; "
        f"for i in $(seq 600); do [ -e {release} ] && break; sleep 0.1; done; fi"
    )
    # A long verify timeout: without heartbeats, its retry after the kill would come only
    # after it, long past this test's time limit.
    return SPEC.replace("concurrency: 2", "concurrency: 1").replace(
        "  command: python3 check.py\n  timeout: 1m\n",
        f"  command: python3 check.py && {wait}\n  timeout: 5m\n",
    )


def _start_and_kill_after_two_commits(repo: Path, env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "first-run.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tempi", *ARGS], cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 150
        while not ((tmp_path / "verify-started").exists() and _commits(repo) == 2):
            assert proc.poll() is None, f"the run ended early with {proc.returncode}: {log.read_text()}"
            assert time.monotonic() < deadline, f"the third shard's verify never started: {log.read_text()}"
            time.sleep(0.2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def _commits(repo: Path) -> int:
    out = subprocess.run(
        ["git", "rev-list", "--count", "main..tempi/migrate"], cwd=repo, capture_output=True, text=True
    )
    return int(out.stdout.strip()) if out.returncode == 0 else 0


def _shards_committed(repo: Path) -> list[str]:
    return git(repo, "log", "--format=%(trailers:key=Tempi-Shard,valueonly)", "main..tempi/migrate").split()


def test_a_killed_run_goes_on_where_it_was(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "pipeline-kill", {"routes": _routes()})
    repo = make_fixture(tmp_path / "repo")
    (repo / "kill.yaml").write_text(_spec(tmp_path))
    # The worker runs inside `tempi pipeline run` here (TEMPORAL_ADDRESS is set).
    env = tempi_env(home, temporal_address)
    try:
        _start_and_kill_after_two_commits(repo, env, tmp_path)
        began = time.monotonic()
        again = run_tempi(ARGS, cwd=repo, env=env, timeout=150)
        print(f"the run after the kill took {time.monotonic() - began:.1f}s", again.stdout, again.stderr)
    finally:
        (tmp_path / "verify-release").touch()  # the killed worker's verify command ends
    assert again.returncode == 0, again.stdout + again.stderr
    assert "4 shards: 4 committed; final verify passed" in again.stdout
    assert Counter(r.route for r in scripted_server.requests_for("pipeline-kill")) == EACH_SHARD_ONCE
    shards = _shards_committed(repo)
    assert len(shards) == 4 and len(set(shards)) == 4


def test_a_run_whose_server_lost_its_database_goes_on_from_git(
    tmp_path: Path, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "pipeline-lost-db", {"routes": _routes()})
    repo = make_fixture(tmp_path / "repo")
    (repo / "kill.yaml").write_text(_spec(tmp_path))
    # No TEMPORAL_ADDRESS: the background service (dev server and worker) runs the pipeline.
    env = tempi_env(home, None)
    try:
        _start_and_kill_after_two_commits(repo, env, tmp_path)
        stop = run_tempi(["server", "stop", "--force"], cwd=repo, env=env, timeout=60)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert read_info(home) is None
        for db in home.glob("temporal.db*"):
            db.unlink()
        (tmp_path / "verify-release").touch()

        again = run_tempi(ARGS, cwd=repo, env=env, timeout=180)
        print(again.stdout, again.stderr)
    finally:
        (tmp_path / "verify-release").touch()
        run_tempi(["server", "stop", "--force"], cwd=repo, env=env, timeout=60)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("(committed by an earlier run)") == 2
    assert "4 shards: 4 committed, 2 from an earlier run; final verify passed" in again.stdout
    # The committed shards are not asked again; delta, whose session went with the
    # database, starts over.
    assert Counter(r.route for r in scripted_server.requests_for("pipeline-lost-db")) == {
        **EACH_SHARD_ONCE,
        "delta.py": 4,
    }
    shards = _shards_committed(repo)
    assert len(shards) == 4 and len(set(shards)) == 4
