"""The CI jobs in deploy/ci/, checked offline: they parse, their shell is valid, every
`tempi pipeline run` flag they pass exists, the cached directory holds TEMPI_HOME and is saved
whatever the job's outcome, the JUnit file they publish is the one the run writes, and they
open a pull (merge) request from the output branch."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tempi.cli.pipeline_command import _parser

CI = Path(__file__).resolve().parents[1] / "deploy" / "ci"


def _run_flags() -> set[str]:
    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    run = sub.choices["run"]  # type: ignore[index]
    return {flag for action in run._actions for flag in action.option_strings}


def _pipeline_runs(script: str) -> list[list[str]]:
    """Each `tempi pipeline run` command in a shell script, as its words."""
    joined = script.replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        if "tempi pipeline run" in line:
            words = shlex.split(line.split("tempi pipeline run", 1)[1].split(")")[0])
            found.append(words)
    return found


def _check_shell(script: str) -> None:
    proc = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + script


def _check_run_flags(runs: list[list[str]]) -> dict[str, str]:
    assert runs, "no `tempi pipeline run` in the job"
    known = _run_flags()
    flags: dict[str, str] = {}
    for words in runs:
        used = [w for w in words if w.startswith("-")]
        assert set(used) <= known, f"unknown flags {set(used) - known}"
        flags.update({w: words[i + 1] for i, w in enumerate(words) if w in used})
    return flags


def test_the_github_actions_job_runs_a_pipeline_resumably_and_opens_a_pull_request() -> None:
    job_file: dict[Any, Any] = yaml.safe_load((CI / "github-actions.yml").read_text())
    assert "workflow_dispatch" in job_file[True]  # YAML 1.1 reads the `on` key as true
    env = job_file["env"]
    assert env["TEMPI_HOME"].startswith(env["TEMPI_WORK"] + "/")
    steps = job_file["jobs"]["pipeline"]["steps"]
    scripts = [s["run"] for s in steps if "run" in s]
    for script in scripts:
        _check_shell(script)
    flags = _check_run_flags([r for s in scripts for r in _pipeline_runs(s)])

    uses = {s["uses"].split("@")[0]: s for s in steps if "uses" in s}
    restore, save = uses["actions/cache/restore"], uses["actions/cache/save"]
    assert restore["with"]["path"] == save["with"]["path"] == env["TEMPI_WORK"]
    assert restore["with"]["restore-keys"] and save["with"]["key"] == restore["with"]["key"]
    assert save["if"] == "always()"
    # The server is stopped before the state is saved, so its database is whole.
    names = [s.get("name") for s in steps]
    stop = next(s for s in steps if "tempi server stop" in s.get("run", ""))
    assert stop["if"] == "always()" and names.index(stop["name"]) < names.index(save["name"])
    run_step = next(s for s in steps if "tempi pipeline run" in s.get("run", ""))
    assert run_step["working-directory"] == env["TEMPI_WORK"] + "/repo"
    assert run_step["timeout-minutes"] < job_file["jobs"]["pipeline"]["timeout-minutes"]

    junit = uses["actions/upload-artifact"]["with"]["path"]
    assert flags["--junit"] == "$TEMPI_WORK/junit.xml" and junit == env["TEMPI_WORK"] + "/junit.xml"
    assert "$GITHUB_STEP_SUMMARY" in run_step["run"] and "--markdown" in flags
    pr = next(s for s in steps if "gh pr create" in s.get("run", ""))
    assert "git push" in pr["run"] and pr["env"]["GH_TOKEN"]
    assert job_file["permissions"] == {"contents": "write", "pull-requests": "write"}


def test_the_gitlab_job_runs_a_pipeline_resumably_and_opens_a_merge_request() -> None:
    jobs: dict[str, Any] = yaml.safe_load((CI / "gitlab-ci.yml").read_text())
    job = jobs["tempi-pipeline"]
    variables = job["variables"]
    assert variables["TEMPI_HOME"].startswith(variables["TEMPI_WORK"] + "/")
    script = "\n".join(job["script"])
    _check_shell(script)
    flags = _check_run_flags(_pipeline_runs(script))

    # The state moves into the project directory when the job ends, which GitLab caches
    # whatever the outcome.
    assert job["cache"]["when"] == "always" and job["cache"]["paths"] == [".tempi-work/"]
    trap = re.search(r"trap '([^']*)' EXIT", script)
    assert trap and "tempi server stop" in trap.group(1) and 'mv "$TEMPI_WORK" .tempi-work' in trap.group(1)
    assert job["artifacts"]["when"] == "always"
    assert flags["--junit"] == "$TEMPI_WORK/junit.xml"
    assert job["artifacts"]["reports"]["junit"] == ".tempi-work/junit.xml"
    assert "/merge_requests" in script and 'git -C "$TEMPI_WORK/repo" push' in script
    assert "timeout" in script.split("tempi pipeline run")[0].splitlines()[-1]
