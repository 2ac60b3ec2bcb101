"""What sharing setup's results with a shard worktree costs: a repository with a venv made
by `setup` in its output checkout, then `share_setup` into fresh worktrees, timed.

    uv run python scripts/pipeline_setup_cost.py [--venv-from PATH] [--shards N]

--venv-from copies an existing venv (e.g. this project's .venv) in as setup's result, to
time a large one; without it setup makes a venv with pip in it (`python3 -m venv`)."""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from tempi.pipeline.git_work import git
from tempi.pipeline.setup import run_setup, share_setup


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--venv-from", type=Path)
    parser.add_argument("--shards", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        (repo / "a.py").write_text("x = 1\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "one file")
        output = Path(tmp) / "output"
        git(repo, "worktree", "add", "-q", "--detach", str(output), "HEAD")
        command = (
            f"cp -a {args.venv_from} .venv && sed -i 's|{args.venv_from}|'$PWD/.venv'|' .venv/bin/activate"
            if args.venv_from
            else "python3 -m venv .venv"
        )
        started = time.perf_counter()
        failed = run_setup([command], str(output), "HEAD")
        assert failed is None, failed
        setup_s = time.perf_counter() - started
        files = sum(1 for _ in (output / ".venv").rglob("*"))
        times, cpu = [], []
        for n in range(args.shards):
            shard = Path(tmp) / f"shard{n}"
            git(repo, "worktree", "add", "-q", "--detach", str(shard), "HEAD")
            started, before = time.perf_counter(), _cpu()
            share_setup(output, shard)
            times.append(time.perf_counter() - started)
            cpu.append(_cpu() - before)
        print(f"setup ({command.split(' &&')[0]}): {setup_s:.2f} s, {files} files in .venv")
        print(
            f"share with a shard: median {sorted(times)[len(times) // 2] * 1000:.0f} ms, "
            f"first {times[0] * 1000:.0f} ms, max {max(times) * 1000:.0f} ms over {len(times)} shards; "
            f"CPU (tempi and its cp/grep/find) median {sorted(cpu)[len(cpu) // 2] * 1000:.0f} ms"
        )


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


if __name__ == "__main__":
    main()
