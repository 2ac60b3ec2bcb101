"""A pipeline's shards take over the worktrees of shards already committed instead of
checking the repository out once per shard: a long run keeps as many checkouts as shards
at work (not one per shard) and its end has only those to remove, while every shard still
starts from a clean checkout of the base, in a worktree of its own path, and a failed
shard's worktree stays for a look. A real `tempi` process, the dev server, real git."""

from __future__ import annotations

import json
from pathlib import Path

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, scripted_home, tempi_env
from tests.pipeline_repo import git
from tests.test_pipeline_run import MORE_VALUES, VALUES, make_fixture, module, write

SIX = {**VALUES, **MORE_VALUES}


def _spec(counts: Path) -> str:
    # Each shard's verify: nothing an earlier shard left (its scratch file) is in this
    # checkout; the checkout is the shard's own (its state directory has no saved patch yet,
    # a committed shard's has); and how many checkouts the repository has at that moment.
    verify = (
        '[ "$(ls out | wc -l)" -eq 1 ] && [ ! -e ../shard.patch ] && '
        f"git worktree list --porcelain | grep -c '^worktree ' >> {counts}"
    )
    return f"""\
version: 1
name: reuse
repo: {{path: ., base: main}}
model: mock/mock-model
targets: {{glob: "src/mods/*.py"}}
steps:
  - {{name: migrate, prompt: "Move {{{{shard.files}}}} to new_api.", max_turns: 4}}
verify: {{command: {json.dumps(verify)}, timeout: 1m}}
concurrency: 1
"""


def _routes() -> dict:
    """Every shard migrates its module and leaves a scratch file, ignored by git so in no
    patch; delta leaves two, and fails its verify."""
    routes = {}
    for name, value in SIX.items():
        scratch = [f"out/{name}.txt", *(["out/more.txt"] if name == "delta" else [])]
        turns = [write(f"src/mods/{name}.py", module(name, "new_api", value))]
        turns += [write(path, "scratch\n") for path in scratch]
        routes[f"{name}.py"] = {"turns": [*turns, {"text": "Done."}]}
    return routes


def test_shards_take_over_committed_worktrees_and_start_clean(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home = scripted_home(tmp_path, scripted_server, "pipeline-reuse", {"routes": _routes()})
    repo = make_fixture(tmp_path / "repo", SIX)
    counts = tmp_path / "worktree-counts"
    (repo / "reuse.yaml").write_text(_spec(counts))

    proc = run_tempi(
        ["pipeline", "run", "reuse.yaml", "--json", "out/summary.json"],
        cwd=repo,
        env=tempi_env(home, temporal_address),
        timeout=180,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    summary = json.loads((repo / "out/summary.json").read_text())
    assert summary["counts"] == {"committed": 5, "failed": 1}, proc.stdout
    # Checked out afresh for every shard, the five shards that passed their verify saw up
    # to eight checkouts (the user's, the output branch's, delta's kept one and five more);
    # taken over, besides those three at most the running shard's and the one the shard
    # committed last is handing on (a shard starts while the one before it is integrated).
    seen = [int(n) for n in counts.read_text().split()]
    assert len(seen) == 5 and max(seen) <= 5, seen
    # The output branch has the five migrations and no scratch file.
    assert git(repo, "diff", "--name-only", "main", "tempi/reuse").split() == [
        f"src/mods/{name}.py" for name in sorted(SIX) if name != "delta"
    ]
    # Only the failed shard keeps its worktree, with what it did there.
    trees = git(repo, "worktree", "list", "--porcelain").count("worktree ")
    assert trees == 2
    failed = next(s for s in summary["shards"] if s["state"] == "failed")
    assert failed["files"] == ["src/mods/delta.py"]
    kept = Path(failed["session_file"]).parent / "work"
    assert (kept / "src/mods/delta.py").read_text() == module("delta", "new_api", 4)
    assert sorted(p.name for p in (kept / "out").iterdir()) == ["delta.txt", "more.txt"]
