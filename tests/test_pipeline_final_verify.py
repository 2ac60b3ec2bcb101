"""What a CI run shows when the pipeline's final verify fails, and when the server goes away
under a running pipeline: the verify's own output on the terminal and in every report
(readable XML even when it was coloured), and an exit code of its own for a lost server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

from tempi.pipeline.reports import EXIT_FINAL_VERIFY, EXIT_SERVER_LOST, junit_xml, markdown
from tempi.pipeline.run_types import PipelineProgress, ShardStatus
from tempi.pipeline.targets import Shard
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git

COLOURED_FAILURE = r"printf '\033[31mFAILED\033[0m tests/test_app.py::test_total \001\n'; exit 1"

SPEC = """\
version: 1
name: final
repo: {path: ., base: main}
model: mock/mock-model
targets: {glob: "src/*.py"}
steps:
  - {name: touch, prompt: "Add a docstring to {{shard.files}}.", max_turns: 3}
verify: {command: sh verify.sh, timeout: 2m}
final: {verify: sh final.sh}
"""


def _repo(root: Path, verify: str, final: str) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    (root / "src").mkdir()
    (root / "src/app.py").write_text("def total():\n    return 1\n")
    (root / "pipeline.yaml").write_text(SPEC)
    (root / "verify.sh").write_text(verify + "\n")
    (root / "final.sh").write_text(final + "\n")
    (root / ".gitignore").write_text("out/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one module")
    return root


def _repo_with_a_held_verify(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The repository, and the files its shard's verify touches once it runs (`started`) and
    waits for (`release`)."""
    started, release = tmp_path / "verify-started", tmp_path / "verify-release"
    wait = f"touch {started}; for i in $(seq 600); do [ -e {release} ] && break; sleep 0.1; done"
    return _repo(tmp_path / "repo", wait, "true"), started, release


def _turns() -> dict:
    content = '"""Totals."""\n\n\ndef total():\n    return 1\n'
    return {
        "turns": [
            {"tool_calls": [{"name": "write", "arguments": {"path": "src/app.py", "content": content}}]},
            {"text": "Done."},
        ]
    }


def test_a_failed_final_verify_shows_its_output_everywhere_a_ci_run_looks(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "final-verify", _turns())
    repo = _repo(tmp_path / "repo", "true", COLOURED_FAILURE)
    args = [
        "pipeline",
        "run",
        "pipeline.yaml",
        "--json",
        "out/s.json",
        "--junit",
        "out/j.xml",
        "--markdown",
        "out/s.md",
    ]

    proc = run_tempi(args, cwd=repo, env=tempi_env(home, temporal_address), timeout=180)

    assert proc.returncode == EXIT_FINAL_VERIFY, proc.stdout + proc.stderr
    assert "final verify failed; the end of its output:" in proc.stdout
    assert "FAILED tests/test_app.py::test_total" in proc.stdout
    # ET.parse fails on the escape and control characters a coloured verify prints.
    suite = ET.parse(repo / "out/j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "1"
    final = next(case for case in suite.iter("testcase") if case.get("name") == "final verify")
    failure = final.find("failure")
    assert failure is not None and (failure.text or "").strip() == "FAILED tests/test_app.py::test_total"
    assert (
        "FAILED tests/test_app.py::test_total"
        in json.loads((repo / "out/s.json").read_text())["final_verify_tail"]
    )
    assert "### Final verify failed" in (repo / "out/s.md").read_text()


def _progress(**changes: object) -> PipelineProgress:
    shard = Shard(index=1, id="s1", files=["src/<module>.py"], directory="src")
    status = ShardStatus(
        shard=shard,
        state="failed",
        reason="verify failed: <module> broke | twice\nagain",
        verify_tail="\x1b[1;31mE\x1b[0m   assert 1 == 2\x0b",
    )
    progress = PipelineProgress(pipeline_id="p", name="n", branch="b", base_commit="c", shards=[status])
    return progress.model_copy(update=changes)


def test_junit_holds_only_what_xml_allows_and_counts_the_final_verify() -> None:
    passed = ET.fromstring(junit_xml(_progress(final_verify="passed")).split("?>", 1)[1])
    suite = passed.find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("2", "1")
    failure = suite.find("testcase/failure")
    assert failure is not None and failure.text == "E   assert 1 == 2"
    none_yet = ET.fromstring(junit_xml(_progress()).split("?>", 1)[1]).find("testsuite")
    assert none_yet is not None and none_yet.get("tests") == "1"


def test_markdown_shows_angle_brackets_as_written_and_keeps_the_table_whole() -> None:
    text = markdown(_progress(final_verify="failed", final_verify_tail="``` fence\n<b>x</b>"))
    row = next(line for line in text.splitlines() if line.startswith("| 1 |"))
    assert "&lt;module&gt; broke \\| twice again" in row and row.count(" | ") == 4
    assert "````\n``` fence\n<b>x</b>\n````" in text


def test_losing_the_server_under_a_run_exits_4_with_pipeline_advice(
    tmp_path: Path, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "lost-server", _turns())
    repo, started, release = _repo_with_a_held_verify(tmp_path)
    env = tempi_env(home, None)  # the background service: the server this test stops
    log = tmp_path / "run.log"
    try:
        with log.open("w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tempi", "pipeline", "run", "pipeline.yaml"],
                cwd=repo,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 120
        while not started.exists():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        stop = run_tempi(["server", "stop", "--force"], cwd=repo, env=env, timeout=60)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        code = proc.wait(timeout=90)
    finally:
        release.touch()
        if proc.poll() is None:
            os.kill(proc.pid, 9)
        run_tempi(["server", "stop", "--force"], cwd=repo, env=env, timeout=60)
    said = log.read_text()
    assert code == EXIT_SERVER_LOST, said
    assert "lost the Temporal server" in said and "`tempi pipeline run pipeline.yaml` goes on" in said
    assert "Traceback" not in said and "tempi --continue" not in said


def test_ctrl_c_leaves_the_run_going_and_wait_writes_its_reports(
    tmp_path: Path, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "ctrl-c", _turns())
    repo, started, release = _repo_with_a_held_verify(tmp_path)
    (repo / "pipeline.yaml").write_text(SPEC + "report: {json: out/s.json}\noutput: {patch: out/o.patch}\n")
    git(repo, "commit", "-q", "-am", "reports")
    env = tempi_env(home, None)  # the background service runs the pipeline, as for a user
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tempi", "pipeline", "run", "pipeline.yaml"],
            cwd=repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while not started.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, out + err
        workflow_id = out.split("workflow ")[1].split()[0]
        assert f"stopped following {workflow_id}; the pipeline goes on" in err
        assert f"`tempi pipeline wait {workflow_id}` follows it again and writes the reports" in err
        assert "Traceback" not in err
        assert not (repo / "out/s.json").exists()
        release.touch()

        waited = run_tempi(["pipeline", "wait", workflow_id], cwd=tmp_path, env=env, timeout=180)
    finally:
        release.touch()
        if proc.poll() is None:
            proc.kill()
        run_tempi(["server", "stop", "--force"], cwd=repo, env=env, timeout=60)

    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert json.loads((repo / "out/s.json").read_text())["counts"] == {"committed": 1}
    assert "src/app.py" in (repo / "out/o.patch").read_text()
