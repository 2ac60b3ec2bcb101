"""The spec's `setup` on a repository with a venv of its own: what it makes reaches every
shard's worktree and the output checkout (verify runs `.venv/bin/python`, which imports the
code through an editable-install `.pth`, so a venv pointing at another checkout fails it), a
failing setup stops the run before any model call, and a later run sets up again where the
last one's result is gone."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

from tempi.pipeline.reports import EXIT_SETUP_FAILED
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git
from tests.test_pipeline_run import module, write

VALUES = {"alpha": 1, "beta": 2}

# An editable install without a network: the venv's site-packages gets a .pth naming this
# checkout's src/ by its absolute path, as `pip install -e .` or `uv sync` would.
SETUP = """\
setup:
  - python3 -m venv --without-pip .venv
  - >-
    .venv/bin/python -c "import os, sysconfig;
    open(os.path.join(sysconfig.get_paths()['purelib'], 'app.pth'), 'w').write(os.getcwd() + '/src')"
"""

SPEC = """\
version: 1
name: venv
repo: {path: ., base: main}
model: mock/mock-model
targets: {glob: "src/mods/*.py"}
steps:
  - {name: migrate, prompt: "Move {{shard.files}} to new_api.", max_turns: 3}
verify: {command: .venv/bin/python check.py, timeout: 1m}
concurrency: 2
final: {verify: .venv/bin/python check.py}
"""

CHECK = f"""\
import importlib
import os
import sys

here = os.path.realpath(os.getcwd())
bad = []
for name, value in {VALUES!r}.items():
    mod = importlib.import_module("mods." + name)
    if not os.path.realpath(mod.__file__).startswith(here + os.sep):
        bad.append(f"{{name}} imported from {{mod.__file__}}, not from {{here}}")
    elif getattr(mod, name)() != value:
        bad.append(f"{{name}}() is wrong")
print("\\n".join(bad) or "all good")
sys.exit(1 if bad else 0)
"""


def _repo(root: Path, setup: str = SETUP) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    (root / "src/mods").mkdir(parents=True)
    for name, value in VALUES.items():
        (root / f"src/mods/{name}.py").write_text(module(name, "old_api", value))
    (root / "src/old_api.py").write_text("def call(x):\n    return x\n")
    (root / "src/new_api.py").write_text("def call(x):\n    return x\n")
    (root / "check.py").write_text(CHECK)
    (root / "pipeline.yaml").write_text(SPEC + setup)
    # `.venv` is not ignored: setup's results must stay out of the shards' patches anyway.
    (root / ".gitignore").write_text("__pycache__/\nout/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "two modules on old_api")
    return root


def _routes() -> dict:
    return {
        f"{name}.py": {
            "turns": [write(f"src/mods/{name}.py", module(name, "new_api", value)), {"text": "Done."}]
        }
        for name, value in VALUES.items()
    }


def test_setup_reaches_every_shard_and_stays_out_of_the_patches(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "setup-venv", {"routes": _routes()})
    repo = _repo(tmp_path / "repo")
    env = tempi_env(home, temporal_address)

    proc = run_tempi(["pipeline", "run", "pipeline.yaml"], cwd=repo, env=env, timeout=180)

    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "2 shards: 2 committed; final verify passed" in out
    # Each shard's verify passed at once: its venv imported its own checkout's code.
    assert len(scripted_server.requests_for("setup-venv")) == 4
    assert git(repo, "diff", "--name-only", "main", "tempi/venv").split() == [
        "src/mods/alpha.py",
        "src/mods/beta.py",
    ]
    assert not (repo / ".venv").exists()  # the user's checkout is left alone


def test_a_run_after_the_last_one_released_its_checkout_sets_up_again(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "setup-again", {"routes": _routes()})
    repo = _repo(tmp_path / "repo")
    env = tempi_env(home, temporal_address)
    first = run_tempi(["pipeline", "run", "pipeline.yaml"], cwd=repo, env=env, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    asked = len(scripted_server.requests_for("setup-again"))

    # As after a lost database: every shard is on the branch, but the final verify still
    # needs the venv, in a checkout the first run removed at its end.
    again = run_tempi(["pipeline", "run", "pipeline.yaml", "--fresh"], cwd=repo, env=env, timeout=180)

    out = again.stdout + again.stderr
    assert again.returncode == 0, out
    assert "2 committed, 2 from an earlier run; final verify passed" in out
    assert len(scripted_server.requests_for("setup-again")) == asked


def test_a_run_after_a_budget_stop_sets_up_again_for_what_is_left(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "setup-budget", {"routes": _routes()})
    repo = _repo(tmp_path / "repo")
    env = tempi_env(home, temporal_address)
    spec = repo / "pipeline.yaml"  # edited, not committed: the base, and so the pipeline, stays
    spec.write_text(SPEC.replace("concurrency: 2", "concurrency: 1\nbudget: {max_cost_usd: 0.001}") + SETUP)
    stopped = run_tempi(["pipeline", "run", "pipeline.yaml"], cwd=repo, env=env, timeout=180)
    assert stopped.returncode == 6, stopped.stdout + stopped.stderr

    spec.write_text(SPEC.replace("concurrency: 2", "concurrency: 1\nbudget: {max_cost_usd: 1}") + SETUP)
    finished = run_tempi(["pipeline", "run", "pipeline.yaml"], cwd=repo, env=env, timeout=180)

    out = finished.stdout + finished.stderr
    assert finished.returncode == 0, out
    assert "2 shards: 2 committed, 1 from an earlier run; final verify passed" in out


def test_a_failing_setup_stops_the_run_before_any_model_call(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "setup-fails", {"routes": _routes()})
    broken = SETUP + '  - "echo ERROR: No matching distribution found for frobnicate >&2; exit 1"\n'
    repo = _repo(tmp_path / "repo", broken)
    args = ["pipeline", "run", "pipeline.yaml", "--json", "out/s.json", "--junit", "out/j.xml"]

    proc = run_tempi(args, cwd=repo, env=tempi_env(home, temporal_address), timeout=180)

    out = proc.stdout
    assert proc.returncode == EXIT_SETUP_FAILED, out + proc.stderr
    assert "setup failed (exit 1): echo ERROR: No matching distribution" in out
    assert "no shard started, no model was asked" in out
    assert "ERROR: No matching distribution found for frobnicate" in out
    assert scripted_server.requests_for("setup-fails") == []
    summary = json.loads((repo / "out/s.json").read_text())
    assert summary["exit_code"] == EXIT_SETUP_FAILED
    assert "frobnicate" in summary["setup_failure"]["tail"]
    suite = ET.parse(repo / "out/j.xml").getroot().find("testsuite")
    assert suite is not None
    case = next(c for c in suite.iter("testcase") if c.get("name") == "setup")
    assert "frobnicate" in (case.findtext("failure") or "")
    # The run let go of the branch: nothing holds it but the user's repository.
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
