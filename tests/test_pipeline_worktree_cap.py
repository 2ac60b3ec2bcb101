"""A pipeline run holds at most its concurrency plus CHECKOUTS_BEYOND_CONCURRENCY checkouts:
with integration held back (the first shard's verify waits on a file this test writes, and
shards commit in the order they started), the shards after it stop starting once the
verified ones waiting for it hold that many, instead of each checking the repository out
anew; so however far integration lags, the end of the run has at most that many to remove.
Failed shards keep their worktrees (for a look) outside that count, so a run with as many
failures as the cap still goes on and completes. A real `tempi` process, the dev server,
real git."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from tempi.cli.pipeline_manage import progress_of
from tempi.pipeline.run_types import PipelineProgress
from tempi.testing.pipeline_many import make_many_targets
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.temporal_client import connect
from tempi.workflows.pipeline_workflow import CHECKOUTS_BEYOND_CONCURRENCY
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git

CONCURRENCY = 2
CAP = CONCURRENCY + CHECKOUTS_BEYOND_CONCURRENCY
FAILING = CAP  # m0001.. fail their verify: counted against the cap, they would fill it
TARGETS = 1 + FAILING + 2 * CAP
# The user's checkout and the output branch's are there besides the shards'.
OTHERS = 2
WAITS = "the next shard waits for a checkout"
TOLD = "integration is behind: each next shard waits"


def _name(i: int) -> str:
    return f"m{i:04d}"


def _routes() -> dict:
    """Each shard's session notes which module it works on, in an ignored file (no part of
    its patch), so the verify can tell the shards apart."""

    def note(name: str) -> dict:
        return {"tool_calls": [{"name": "write", "arguments": {"path": "out/who", "content": name}}]}

    return {f"{_name(i)}.py": {"turns": [note(_name(i)), {"text": "Done."}]} for i in range(TARGETS)}


def _count_worktrees(counts: Path) -> str:
    return f"git worktree list --porcelain | grep -c '^worktree ' >> {counts}"


def _verify_script(tmp: Path, counts: Path) -> Path:
    """Every shard's verify records how many checkouts the repository has; the first shard's
    waits until the test writes `go`; the next FAILING shards fail."""
    failing = "|".join(_name(i) for i in range(1, 1 + FAILING))
    script = tmp / "verify.sh"
    script.write_text(
        f"""\
who=$(cat out/who)
{_count_worktrees(counts)}
case "$who" in
  {_name(0)}) touch {tmp / "held"}; while [ ! -e {tmp / "go"} ]; do sleep 0.05; done ;;
  {failing}) echo "$who fails on purpose"; exit 1 ;;
esac
"""
    )
    return script


def _spec(script: Path, end_counts: Path) -> str:
    return f"""\
version: 1
name: cap
repo: {{path: ., base: main}}
model: mock/mock-model
targets: {{glob: "src/m/*.py"}}
steps:
  - {{name: look, prompt: "Look at {{{{shard.files}}}}.", max_turns: 3}}
verify: {{command: "sh {script}", timeout: 5m}}
final: {{verify: "{_count_worktrees(end_counts)}"}}
concurrency: {CONCURRENCY}
"""


def _worktrees(repo: Path) -> int:
    return git(repo, "worktree", "list", "--porcelain").count("worktree ")


async def _held_back(address: str, workflow_id: str, repo: Path, held: Path) -> tuple[PipelineProgress, int]:
    """The pipeline's progress once the first shard waits in its verify and no other shard is
    at work (the rest verified, failed or not started), and the most checkouts seen until then."""
    client = await connect(address)
    most = 0
    deadline = time.monotonic() + 180
    while True:
        most = max(most, _worktrees(repo))
        progress = await progress_of(client, workflow_id)
        others = [s.state for s in progress.shards[1:]]
        if held.exists() and not {"running", "stepped"} & set(others):
            return progress, most
        assert time.monotonic() < deadline, others
        await asyncio.sleep(0.2)


async def test_held_back_integration_holds_the_checkouts_at_the_cap_and_failures_do_not_count(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "pipeline-cap", {"routes": _routes()})
    repo = make_many_targets(tmp_path / "repo", TARGETS, concurrency=CONCURRENCY)
    counts, end_counts = tmp_path / "counts", tmp_path / "end-counts"
    (repo / "cap.yaml").write_text(_spec(_verify_script(tmp_path, counts), end_counts))
    env = tempi_env(home, temporal_address)

    started = run_tempi(["pipeline", "run", "cap.yaml", "--detach"], cwd=repo, env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    workflow_id = started.stdout.split("workflow ")[1].split()[0]
    # The command detached: this process is the worker that runs the pipeline.
    waiting = subprocess.Popen(
        [sys.executable, "-m", "tempi", "pipeline", "wait", workflow_id],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []

    def read_lines(stream: IO[str]) -> None:
        for line in stream:
            lines.append(line)

    assert waiting.stdout is not None
    reading = threading.Thread(target=read_lines, args=(waiting.stdout,), daemon=True)
    reading.start()
    try:
        progress, most = await _held_back(temporal_address, workflow_id, repo, tmp_path / "held")
        states = [s.state for s in progress.shards[1:]]
        # Never more checkouts than the cap's, the kept failed ones' and the two others'.
        assert most <= OTHERS + CAP + FAILING, (most, states)
        # Shards wait to start, with a slot of the window free: the failed ones gave their
        # checkouts up, the first shard and the verified ones waiting for it hold the cap's.
        assert states.count("failed") == FAILING, states
        assert states.count("verified") == CAP - 1, states
        assert states.count("pending") == TARGETS - 1 - FAILING - (CAP - 1), states
        # What an operator asking now is told: shards wait, and why.
        assert progress.waiting_for_checkout
        status = run_tempi(["pipeline", "status", workflow_id], cwd=repo, env=env)
        assert WAITS in status.stdout, status.stdout + status.stderr
        # The watching command tells it too (once it has looked: on a loaded machine it may
        # start after this test saw the shards held back).
        deadline = time.monotonic() + 60
        while not any(TOLD in line for line in lines):
            assert time.monotonic() < deadline and reading.is_alive(), lines
            await asyncio.sleep(0.1)
        (tmp_path / "go").touch()
        waiting.wait(timeout=240)
        reading.join(timeout=10)
        out, err = "".join(lines), waiting.stderr.read() if waiting.stderr else ""
    finally:
        waiting.kill()
    assert f"{TARGETS} shards: {TARGETS - FAILING} committed, {FAILING} failed" in out, out + err
    # The watching command said it once; the final summary no longer says it.
    assert out.count(TOLD) == 1, out
    assert WAITS not in out.splitlines()[-1], out

    seen = [int(n) for n in counts.read_text().split()]
    assert len(seen) == TARGETS and max(seen) <= OTHERS + CAP + FAILING, seen
    # What the end of the run had to remove: the output's checkout and at most the cap's.
    (at_end,) = (int(n) for n in end_counts.read_text().split())
    print(f"checkouts: at most {max(seen)} seen by a verify, {most} while held back, {at_end} at the end")
    assert at_end - OTHERS - FAILING <= CAP, at_end
    # The failed shards' worktrees stay, with what their sessions left; the rest are gone.
    assert _worktrees(repo) == 1 + FAILING
    kept = git(repo, "worktree", "list", "--porcelain").split("worktree ")[2:]
    assert sorted((Path(k.split()[0]) / "out/who").read_text() for k in kept) == [
        _name(i) for i in range(1, 1 + FAILING)
    ]
