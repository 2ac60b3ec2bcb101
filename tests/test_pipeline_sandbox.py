"""`sandbox: bwrap` in a pipeline spec: each shard's tools run in bubblewrap, where only the
shard's worktree is the host's, and what they change there is what the shard commits."""

from __future__ import annotations

from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git
from tests.test_pipeline_run import make_fixture, module

pytestmark = pytest.mark.slow

SPEC = """\
version: 1
name: boxed
model: mock/mock-model
sandbox: bwrap
targets: {glob: "src/mods/alpha.py"}
steps:
  - {name: migrate, prompt: "Move {{shard.files}} to new_api.", max_turns: 4}
verify: {command: python3 check.py}
"""


def test_a_bwrap_shard_writes_its_worktree_and_nothing_outside_it(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    outside = tmp_path / "outside.txt"
    new_alpha = module("alpha", "new_api", 1).replace("\n", "\\n")
    command = f"printf '{new_alpha}' > src/mods/alpha.py; echo escaped > {outside}"
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "Done."}]
    home = scripted_home(
        tmp_path, scripted_server, "pipeline-bwrap", {"routes": {"alpha.py": {"turns": turns}}}
    )
    repo = make_fixture(tmp_path / "repo")
    (repo / "boxed.yaml").write_text(SPEC)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a sandboxed pipeline")

    proc = run_tempi(
        ["pipeline", "run", "boxed.yaml"], cwd=repo, env=tempi_env(home, temporal_address), timeout=180
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "committed: src/mods/alpha.py" in proc.stdout
    assert git(repo, "show", "tempi/boxed:src/mods/alpha.py") == module("alpha", "new_api", 1)
    # The same command's write beside the repository stayed in the sandbox.
    assert not outside.exists()
