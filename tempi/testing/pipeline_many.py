"""A repository with many trivial pipeline targets, the scripted model's answer to each of
them, and the history every run of a pipeline left: what the continue-as-new test and the
1,000-target benchmark share."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

from temporalio.client import Client

SPEC = """\
version: 1
name: many
repo: {{path: ., base: main}}
model: mock/mock-model
targets: {{glob: "src/m/*.py"}}
steps:
  - {{name: look, prompt: "Look at {{{{shard.files}}}}.", max_turns: 2}}
concurrency: {concurrency}
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def make_many_targets(root: Path, count: int, *, concurrency: int) -> Path:
    """A git repository with `count` modules src/m/m0000.py... (no file name inside another)
    and pipeline.yaml, a one-step spec over them."""
    (root / "src/m").mkdir(parents=True)
    for i in range(count):
        (root / f"src/m/m{i:04d}.py").write_text(f"VALUE = {i}\n")
    (root / "pipeline.yaml").write_text(SPEC.format(concurrency=concurrency))
    (root / ".gitignore").write_text("out/\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", f"{count} modules")
    return root


def scenario(count: int) -> dict[str, Any]:
    """Every shard's session gets one answer with no edit (the shard commits an empty
    change), each from its file's own route, so the requests say which shard asked."""
    answer = {"turns": [{"text": "Nothing to change here."}]}
    return {"routes": {f"m{i:04d}.py": answer for i in range(count)}}


async def history_runs(client: Client, workflow_id: str, expected_runs: int) -> list[int]:
    """The number of events in each run of a workflow, oldest first. Visibility lags behind
    the last run a little, so this waits (up to 10 s) until it lists `expected_runs`."""
    for _ in range(50):
        executions = [e async for e in client.list_workflows(f'WorkflowId = "{workflow_id}"')]
        if len(executions) >= expected_runs:
            break
        await asyncio.sleep(0.2)
    executions.sort(key=lambda e: e.start_time)
    counts = []
    for execution in executions:
        history = await client.get_workflow_handle(workflow_id, run_id=execution.run_id).fetch_history()
        counts.append(len(history.events))
    return counts
