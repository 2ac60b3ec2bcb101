"""`tempi pipeline run` for real: a real `tempi` process, the dev server, a git repository
made here and the scripted model answering each shard by the file it works on."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git

VALUES = {"alpha": 1, "beta": 2, "delta": 4, "gamma": 3}

# The happy path's two more modules, which migrate at once (six in all, as the issue asks).
MORE_VALUES = {"epsilon": 5, "zeta": 6}


def check_script(values: dict[str, int]) -> str:
    """The repository's test: each module's function still returns its value."""
    return f"""\
import importlib
import sys

sys.path.insert(0, "src")
bad = []
for name, value in {values!r}.items():
    got = getattr(importlib.import_module("mods." + name), name)()
    if got != value:
        bad.append(f"{{name}}() returned {{got}}, expected {{value}}")
print("\\n".join(bad) or "all good")
sys.exit(1 if bad else 0)
"""


SPEC = """\
version: 1
name: migrate
repo: {path: ., base: main}
model: mock/mock-model
context: "Use new_api everywhere."
targets: {glob: "src/mods/*.py"}
steps:
  - {name: migrate, prompt: "Move {{shard.files}} from old_api to new_api.", max_turns: 4}
verify:
  command: python3 check.py
  timeout: 1m
  repair: {attempts: 1, prompt: "The check failed:\\n{{verify.tail}}\\nFix it."}
concurrency: 2
final: {verify: python3 check.py}
report: {markdown: out/summary.md}
"""


def module(name: str, api: str, value: int) -> str:
    return f"from {api} import call\n\n\ndef {name}():\n    return call({value})\n"


def write(path: str, content: str) -> dict:
    return {"tool_calls": [{"name": "write", "arguments": {"path": path, "content": content}}]}


def _routes() -> dict:
    """alpha, gamma, epsilon and zeta migrate at once; beta's first edit breaks the check and
    the repair fixes it; delta's edit and its repair are both wrong."""

    def path(name: str) -> str:
        return f"src/mods/{name}.py"

    return {
        "alpha.py": {"turns": [write(path("alpha"), module("alpha", "new_api", 1)), {"text": "Done."}]},
        "gamma.py": {"turns": [write(path("gamma"), module("gamma", "new_api", 3)), {"text": "Done."}]},
        "epsilon.py": {"turns": [write(path("epsilon"), module("epsilon", "new_api", 5)), {"text": "Done."}]},
        "zeta.py": {"turns": [write(path("zeta"), module("zeta", "new_api", 6)), {"text": "Done."}]},
        "beta.py": {
            "turns": [
                write(path("beta"), module("beta", "new_api", 20)),
                {"text": "Done."},
                write(path("beta"), module("beta", "new_api", 2)),
                {"text": "Fixed."},
            ]
        },
        "delta.py": {
            "turns": [
                write(path("delta"), module("delta", "new_api", 40)),
                {"text": "Done."},
                write(path("delta"), module("delta", "new_api", 400)),
                {"text": "Fixed, I think."},
            ]
        },
    }


def make_fixture(root: Path, values: dict[str, int] = VALUES) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    (root / "src/mods").mkdir(parents=True)
    for name, value in values.items():
        (root / f"src/mods/{name}.py").write_text(module(name, "old_api", value))
    (root / "src/old_api.py").write_text("def call(x):\n    return x\n")
    (root / "src/new_api.py").write_text("def call(x):\n    return x\n")
    (root / "check.py").write_text(check_script(values))
    (root / "pipeline.yaml").write_text(SPEC)
    # What the check leaves behind is no part of a shard's patch.
    (root / ".gitignore").write_text("__pycache__/\nout/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"{len(values)} modules on old_api")
    return root


def test_pipeline_commits_verified_shards_repairs_one_and_reports_the_failure(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "pipeline-run", {"routes": _routes()})
    six = {**VALUES, **MORE_VALUES}
    repo = make_fixture(tmp_path / "repo", six)
    env = tempi_env(home, temporal_address)
    args = ["pipeline", "run", "pipeline.yaml", "--json", "out/summary.json", "--junit", "out/junit.xml"]

    proc = run_tempi(args, cwd=repo, env=env, timeout=180)
    out = proc.stdout
    print(out)
    assert proc.returncode == 1, out + proc.stderr
    # A line per state change, the failure's reason, and the summary.
    assert "committed: src/mods/alpha.py" in out
    assert "committed: src/mods/beta.py (1 repair)" in out
    assert "failed: src/mods/delta.py" in out
    assert "verify failed after 1 repair(s) (exit 1): python3 check.py" in out
    assert "6 shards: 5 committed, 1 failed; final verify passed" in out

    # One commit per verified shard on the output branch, in shard order, with trailers.
    log = git(repo, "log", "--format=%s%n%b--", "main..tempi/migrate")
    commits = [c.strip() for c in log.split("--") if c.strip()]
    assert [c.splitlines()[0] for c in commits] == [
        f"migrate (migrate): src/mods/{name}.py" for name in ("zeta", "gamma", "epsilon", "beta", "alpha")
    ]
    assert all("Tempi-Pipeline: pipeline-migrate-" in c and "Tempi-Shard: " in c for c in commits)
    # The expected change: five modules on new_api with their values, delta untouched.
    for name, value in six.items():
        shown = git(repo, "show", f"tempi/migrate:src/mods/{name}.py")
        api = "old_api" if name == "delta" else "new_api"
        assert shown == module(name, api, value), name
    assert git(repo, "diff", "--stat", "main", "tempi/migrate").count("|") == 5
    # The user's checkout is left alone, and only the failed shard keeps its worktree, so
    # the branch can be checked out here.
    assert git(repo, "status", "--porcelain") == ""
    worktrees = git(repo, "worktree", "list", "--porcelain").count("worktree ")
    assert worktrees == 2
    git(repo, "checkout", "-q", "tempi/migrate")
    git(repo, "checkout", "-q", "main")
    assert (repo / "src/mods/alpha.py").read_text() == module("alpha", "old_api", 1)

    # Beta's repair saw the check's output; delta was asked to repair once, then gave up.
    beta = scripted_server.requests_for("pipeline-run")
    repair_prompts = [
        r.body["messages"][-1]["content"] for r in beta if r.route == "beta.py" and r.turn_index == 2
    ]
    assert any("beta() returned 20, expected 2" in str(p) for p in repair_prompts)
    requests = len(scripted_server.requests_for("pipeline-run"))
    assert requests == 2 + 2 + 2 + 2 + 4 + 4

    summary = json.loads((repo / "out/summary.json").read_text())
    assert summary["exit_code"] == 1
    assert summary["counts"] == {"committed": 5, "failed": 1}
    delta = next(s for s in summary["shards"] if s["files"] == ["src/mods/delta.py"])
    assert delta["state"] == "failed" and delta["repairs"] == 1
    assert "delta() returned 400, expected 4" in delta["verify_tail"]
    assert Path(delta["session_file"]).is_file()

    suite = ET.parse(repo / "out/junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "7" and suite.get("failures") == "1"
    failures = [case for case in suite.iter("testcase") if case.find("failure") is not None]
    assert [case.get("name") for case in failures] == ["src/mods/delta.py"]
    assert "delta() returned 400, expected 4" in (failures[0].find("failure").text or "")  # type: ignore[union-attr]
    assert "| 3 | `src/mods/delta.py` | failed | 1 |" in (repo / "out/summary.md").read_text()

    # The same command again: the finished pipeline's result, no model request, no new commit.
    again = run_tempi(args, cwd=repo, env=env, timeout=120)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "finished before" in again.stdout
    assert len(scripted_server.requests_for("pipeline-run")) == requests
    assert git(repo, "log", "--format=%H", "main..tempi/migrate").count("\n") == 5
    workflow_id = again.stdout.split("workflow ")[1].split()[0]
    # The list says what became of it (not Temporal's "completed"); a cancel says it is over.
    listed = run_tempi(["pipeline", "list"], cwd=repo, env=env)
    assert f"{workflow_id}  some shards failed (exit 1): 5 committed, 1 failed  started " in listed.stdout, (
        listed.stdout + listed.stderr
    )
    cancel = run_tempi(["pipeline", "cancel", workflow_id], cwd=repo, env=env)
    assert cancel.returncode == 2
    assert f"{workflow_id} has finished (some shards failed (exit 1)" in cancel.stderr, cancel.stderr
    status = run_tempi(["pipeline", "status", workflow_id], cwd=repo, env=env)
    assert "failed: src/mods/delta.py" in status.stdout and "phase done" in status.stdout, (
        status.stdout + status.stderr
    )

    # A new run (as after the server lost its state) finds the five commits by their
    # trailers and runs only the failed shard again.
    fresh = run_tempi([*args, "--fresh"], cwd=repo, env=env, timeout=180)
    assert fresh.returncode == 1, fresh.stdout + fresh.stderr
    assert fresh.stdout.count("(committed by an earlier run)") == 5
    routes = [r.route for r in scripted_server.requests_for("pipeline-run")[requests:]]
    assert routes == ["delta.py"] * 4
    assert git(repo, "log", "--format=%H", "main..tempi/migrate").count("\n") == 5

    # The failed shard's worktree stayed for a look; `clean` removes it.
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 2
    cleaned = run_tempi(["pipeline", "clean"], cwd=repo, env=env)
    assert cleaned.returncode == 0 and "removed 1 worktree;" in cleaned.stdout, (
        cleaned.stdout + cleaned.stderr
    )
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


@pytest.mark.slow
def test_a_step_stops_at_its_max_turns_with_the_reason(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    looping = [write("src/mods/alpha.py", module("alpha", "new_api", n)) for n in range(10)]
    home = scripted_home(
        tmp_path, scripted_server, "pipeline-turns", {"routes": {"alpha.py": {"turns": looping}}}
    )
    repo = make_fixture(tmp_path / "repo")
    (repo / "turns.yaml").write_text(
        SPEC.replace('glob: "src/mods/*.py"', 'glob: "src/mods/alpha.py"').replace(
            "max_turns: 4", "max_turns: 3"
        )
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one target")
    proc = run_tempi(
        ["pipeline", "run", "turns.yaml", "--mode", "json"], cwd=repo, env=tempi_env(home, temporal_address)
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    failed = [e for e in events if e["type"] == "shard" and e["state"] == "failed"]
    assert failed and failed[0]["reason"] == (
        "step migrate: stopped after 3 turns, its limit (max_turns), before the model finished"
    )
    assert events[-1]["type"] == "summary" and events[-1]["counts"] == {"failed": 1}
    assert len(scripted_server.requests_for("pipeline-turns")) == 3
    assert git(repo, "log", "--format=%H", "main..tempi/migrate") == ""


@pytest.mark.slow
def test_a_cancelled_pipeline_exits_7_and_starts_no_shard(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "pipeline-cancel", [{"text": "never asked"}])
    repo = make_fixture(tmp_path / "repo")
    env = tempi_env(home, temporal_address)
    # No worker runs between the commands (it lives in each `tempi` process here), so the
    # cancel reaches the pipeline before its first shard.
    started = run_tempi(["pipeline", "run", "pipeline.yaml", "--detach"], cwd=repo, env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    workflow_id = started.stdout.split("workflow ")[1].split()[0]
    cancelled = run_tempi(["pipeline", "cancel", workflow_id], cwd=repo, env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    waited = run_tempi(["pipeline", "wait", workflow_id], cwd=repo, env=env)
    assert waited.returncode == 7, waited.stdout + waited.stderr
    assert "4 shards: 4 not started; cancelled" in waited.stdout
    assert scripted_server.requests_for("pipeline-cancel") == []
    assert git(repo, "log", "--format=%H", "main..tempi/migrate") == ""
