"""Operator controls on a running `tempi pipeline`: pause (no new shard starts), skip a pending
shard (reported as skipped, not failed), retry a failed one, change the concurrency, resume;
and the errors a control the pipeline cannot take gets. Real `tempi` processes against the
dev server and the scripted model. One `tempi worker` runs the pipeline throughout, as a
deployment's does, and the commands bring none: a command's own worker stops with it and
cancels what it had taken (a shard's model call, whose retry then took the next scripted
answer)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tempi.cli.runtime import CLIENT_WORKER_ENV
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows.session_types import DEFAULT_TASK_QUEUE
from tests.conftest import run_tempi, scripted_home, start_tempi_worker, tempi_env
from tests.pipeline_repo import git
from tests.processes import stop_process
from tests.test_pipeline_run import SPEC, VALUES, make_fixture, module, write

ALPHA_FIRST_ANSWER_MS = 8000


def _routes() -> dict:
    """alpha's first run fails its check even after the repair; its retry gets it right.
    beta and delta migrate at once; gamma is skipped, so it is never asked."""

    def good(name: str) -> list[dict]:
        return [write(f"src/mods/{name}.py", module(name, "new_api", VALUES[name])), {"text": "Done."}]

    alpha_wrong = write("src/mods/alpha.py", module("alpha", "new_api", 10))
    # alpha's first answer comes slowly: the pause sent right after the resume must land while
    # alpha works (a loaded CI machine took longer to start the pausing command than alpha's
    # whole run, and beta started).
    alpha_first = {**alpha_wrong, "first_chunk_delay_ms": ALPHA_FIRST_ANSWER_MS}
    return {
        "alpha.py": {
            "select": "sequential",
            "turns": [alpha_first, {"text": "Done."}, alpha_wrong, {"text": "Still done."}, *good("alpha")],
        },
        **{f"{name}.py": {"turns": good(name)} for name in ("beta", "delta", "gamma")},
    }


def _status(repo: Path, env: dict[str, str], workflow_id: str) -> str:
    proc = run_tempi(["pipeline", "status", workflow_id], cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _control(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_tempi(["pipeline", *args], cwd=repo, env=env)


@pytest.mark.slow
def test_pause_skip_retry_concurrency_and_resume_steer_a_running_pipeline(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "pipeline-controls", {"routes": _routes()})
    repo = make_fixture(tmp_path / "repo")
    (repo / "controls.yaml").write_text(SPEC.replace("concurrency: 2", "concurrency: 1"))
    env = tempi_env(home, temporal_address)
    del env[CLIENT_WORKER_ENV]
    worker = start_tempi_worker(home, temporal_address, DEFAULT_TASK_QUEUE, tmp_path / "worker.log")
    try:
        _steer(repo, env, scripted_server)
    finally:
        stop_process(worker)


def _steer(repo: Path, env: dict[str, str], scripted_server: ScriptedLLMServer) -> None:
    args = ["pipeline", "run", "controls.yaml", "--json", "out/summary.json", "--junit", "out/junit.xml"]

    started = run_tempi([*args, "--detach"], cwd=repo, env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    workflow_id = started.stdout.split("workflow ")[1].split()[0]
    paused = _control(repo, env, "pause", workflow_id)
    assert paused.returncode == 0, paused.stdout + paused.stderr
    assert "paused: no new shard starts" in paused.stdout

    skipped = _control(repo, env, "skip", workflow_id, "src/mods/gamma.py")
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "skipped" in skipped.stdout
    # Controls the pipeline cannot take say why, and change nothing.
    unknown = _control(repo, env, "skip", workflow_id, "src/mods/omega.py")
    assert unknown.returncode == 2 and "no shard 'src/mods/omega.py'" in unknown.stderr, unknown.stderr
    again = _control(repo, env, "skip", workflow_id, "src/mods/gamma.py")
    assert again.returncode == 2 and "is skipped; only a pending shard can be skipped" in again.stderr, (
        again.stderr
    )
    not_failed = _control(repo, env, "retry", workflow_id, "src/mods/delta.py")
    assert not_failed.returncode == 2, not_failed.stdout + not_failed.stderr
    assert "is pending; only a failed or conflict shard runs again" in not_failed.stderr
    zero = _control(repo, env, "concurrency", workflow_id, "0")
    assert zero.returncode == 2 and "give a positive whole number" in zero.stderr

    status = _status(repo, env, workflow_id)
    assert "skipped: src/mods/gamma.py" in status and "paused" in status, status
    assert "beta" not in Counter(r.route for r in scripted_server.requests_for("pipeline-controls"))

    # Resumed and paused again: the one slot takes alpha, and nothing starts after it.
    assert _control(repo, env, "resume", workflow_id).returncode == 0
    assert _control(repo, env, "pause", workflow_id).returncode == 0
    waiting = subprocess.Popen(
        [sys.executable, "-m", "tempi", "pipeline", "wait", workflow_id],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while "failed: src/mods/alpha.py" not in (status := _status(repo, env, workflow_id)):
            assert time.monotonic() < deadline, status
            time.sleep(1)
        assert "pending: src/mods/beta.py" in status and "pending: src/mods/delta.py" in status, status
        assert set(r.route for r in scripted_server.requests_for("pipeline-controls")) == {"alpha.py"}

        retried = _control(repo, env, "retry", workflow_id, "src/mods/alpha.py")
        assert retried.returncode == 0, retried.stdout + retried.stderr
        wider = _control(repo, env, "concurrency", workflow_id, "2")
        assert wider.returncode == 0 and "concurrency 2" in wider.stdout, wider.stdout + wider.stderr
        assert _control(repo, env, "resume", workflow_id).returncode == 0
        out, err = waiting.communicate(timeout=180)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, out + err
    assert "4 shards: 3 committed, 1 skipped; final verify passed" in out
    assert out.index("pipeline paused: no new shard starts") < out.index("pipeline resumed")

    assert Counter(r.route for r in scripted_server.requests_for("pipeline-controls")) == {
        "alpha.py": 6,
        "beta.py": 2,
        "delta.py": 2,
    }
    log = git(repo, "log", "--format=%s", "main..tempi/migrate").splitlines()
    assert sorted(log) == [f"migrate (migrate): src/mods/{n}.py" for n in ("alpha", "beta", "delta")]
    assert log[0] == "migrate (migrate): src/mods/alpha.py"  # the retry started last

    # The same command again writes the reports of the finished pipeline.
    reports = run_tempi(args, cwd=repo, env=env)
    assert reports.returncode == 0, reports.stdout + reports.stderr
    summary = json.loads((repo / "out/summary.json").read_text())
    assert summary["counts"] == {"committed": 3, "skipped": 1} and summary["exit_code"] == 0
    alpha = next(s for s in summary["shards"] if s["files"] == ["src/mods/alpha.py"])
    assert alpha["retries"] == 1 and alpha["state"] == "committed"
    suite = ET.parse(repo / "out/junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0" and suite.get("skipped") == "1"
    skipped_cases = [case.get("name") for case in suite.iter("testcase") if case.find("skipped") is not None]
    assert skipped_cases == ["src/mods/gamma.py"]
    assert (
        "| 4 | `src/mods/gamma.py` | skipped | 0 | skipped by an operator |"
        in (repo / "out/summary.md").read_text()
    )
