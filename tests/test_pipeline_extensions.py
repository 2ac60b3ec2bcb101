"""Extensions in `tempi pipeline run`: each shard's session loads the repository's
extensions (its .tempi/extensions/ and the spec's `extensions:`), so a guard that blocks
`rm -rf` in a terminal blocks it in CI too; a broken one stops the run before any shard."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git
from tests.test_pipeline_run import make_fixture, module, write

pytestmark = pytest.mark.slow

GUARD = Path(__file__).parent / "extensions" / "guard.py"

SPEC = """\
version: 1
name: guarded
model: mock/mock-model
targets: {glob: "src/mods/alpha.py"}
extensions: [tools/guard.py]
steps:
  - {name: migrate, prompt: "Move {{shard.files}} to new_api.", max_turns: 4}
verify: {command: python3 check.py}
"""


def _repo(tmp_path: Path, spec: str) -> Path:
    repo = make_fixture(tmp_path / "repo")
    (repo / "tools").mkdir()
    shutil.copy(GUARD, repo / "tools" / "guard.py")
    (repo / "guarded.yaml").write_text(spec)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a guard extension and its pipeline")
    return repo


def test_a_pipeline_shard_runs_the_specs_extension_and_its_guard_blocks_rm_rf(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf src/mods"}}]},
        write("src/mods/alpha.py", module("alpha", "new_api", 1)),
        {"text": "Done."},
    ]
    home = scripted_home(
        tmp_path, scripted_server, "pipeline-ext", {"routes": {"alpha.py": {"turns": turns}}}
    )
    repo = _repo(tmp_path, SPEC)

    proc = run_tempi(
        ["pipeline", "run", "guarded.yaml"], cwd=repo, env=tempi_env(home, temporal_address), timeout=180
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "committed: src/mods/alpha.py" in proc.stdout
    # The other modules survived the blocked command: only alpha changed on the branch.
    assert git(repo, "diff", "--name-only", "main", "tempi/guarded").split() == ["src/mods/alpha.py"]

    requests = scripted_server.requests_for("pipeline-ext")
    assert len(requests) == 3
    assert "Guard rule: never delete files" in json.dumps(requests[0].body)
    blocked = json.dumps(requests[1].body["messages"][-1])
    assert "rm -rf is not allowed here (guard extension)" in blocked


def test_a_broken_extension_stops_the_pipeline_before_any_shard(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "pipeline-ext-broken", [{"text": "never asked"}])
    repo = _repo(tmp_path, SPEC.replace("tools/guard.py", "tools/missing.py"))
    proc = run_tempi(["pipeline", "run", "guarded.yaml"], cwd=repo, env=tempi_env(home, temporal_address))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"extension {repo / 'tools' / 'missing.py'}" in proc.stderr
    assert scripted_server.requests_for("pipeline-ext-broken") == []
    assert git(repo, "branch", "--list", "tempi/guarded") == ""
