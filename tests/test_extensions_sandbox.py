"""Extensions with `tempi -p --sandbox docker`: the tools run in the session's container,
and the owner's extension's hooks still guard them from the worker that serves the sandbox.
(A repository's own extensions are left out under a sandbox: they would run on the host.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.docker_support import docker_client, open_host_dir, sandbox_image  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow

GUARD = Path(__file__).parent / "extensions" / "guard.py"


def _bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def test_hooks_guard_the_tools_of_a_docker_sandbox(
    tmp_path: Path,
    temporal_address: str,
    scripted_server: ScriptedLLMServer,
    sandbox_image: str,  # noqa: F811
) -> None:
    scenario = "ext-docker"
    scripted_server.add_scenario(
        scenario,
        [_bash("rm -rf keep"), _bash("echo original"), _bash("pwd; ls keep"), {"text": "Done."}],
    )
    home, work = tmp_path / "home", open_host_dir(tmp_path / "project")
    (work / "keep").mkdir()
    (work / "keep" / "notes.txt").write_text("important\n")
    (home / "extensions").mkdir(parents=True)
    shutil.copy(GUARD, home / "extensions" / "guard.py")
    write_models_json(home, scripted_server, scenario)

    done = run_tempi(
        ["--model", "mock/mock-model", "--sandbox", f"docker:{sandbox_image}", "-p", "tidy up"],
        cwd=work,
        env=tempi_env(home, temporal_address),
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / "keep" / "notes.txt").read_text() == "important\n"
    requests = scripted_server.requests_for(scenario)
    results = [json.dumps(r.body["messages"][-1]) for r in requests[1:]]
    assert "rm -rf is not allowed here (guard extension)" in results[0]
    assert "rewritten-by-guard" in results[1]
    # The commands ran in the container, at its workspace.
    assert "/workspace" in results[2] and "notes.txt" in results[2]
