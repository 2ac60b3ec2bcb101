"""A 1,000-target pipeline (200 with --quick) of trivial scripted shards, end to end through
a real `tempi pipeline run`: its wall time, and the history of every run of the pipeline
workflow (continue-as-new keeps each one bounded)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.report import print_table
from bench.rig import DevServer, ScriptedServerProcess, clean_env, tempi_command, write_models_json
from tempi.testing.pipeline_many import history_runs, make_many_targets, scenario
from tempi.workers.temporal_client import connect

CONCURRENCY = 8


async def run(quick: bool, profile: bool = False) -> dict[str, Any]:
    del profile
    targets = 200 if quick else 1000
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-pipeline-"))
    home = tmp / "home"
    with (
        ScriptedServerProcess(tmp / "llm", {"many": scenario(targets)}) as llm,
        DevServer(tmp / "temporal") as dev,
    ):
        write_models_json(home, llm.base_url, "many")
        repo = make_many_targets(tmp / "repo", targets, concurrency=CONCURRENCY)
        started = time.monotonic()
        proc = subprocess.run(
            tempi_command("pipeline", "run", "pipeline.yaml", "--json", "out/summary.json"),
            cwd=repo,
            env=clean_env(home, dev.address),
            capture_output=True,
            text=True,
            timeout=targets * 5 + 300,
            check=False,
        )
        elapsed = time.monotonic() - started
        if proc.returncode != 0:
            raise RuntimeError(f"tempi pipeline run exited {proc.returncode}: {proc.stderr[-2000:]}")
        summary = json.loads((repo / "out/summary.json").read_text())
        workflow_id = proc.stdout.split("workflow ")[1].split()[0]
        runs = await history_runs(await connect(dev.address), workflow_id, summary["runs"])
    results = {
        "targets": targets,
        "concurrency": CONCURRENCY,
        "seconds": round(elapsed, 1),
        "committed": summary["counts"].get("committed", 0),
        "runs": len(runs),
        "total_events": sum(runs),
        "largest_run_events": max(runs),
        "events_per_shard": round(sum(runs) / targets, 1),
    }
    print_table(
        f"A {targets}-target pipeline of trivial shards, {CONCURRENCY} at once",
        ["targets", "committed", "runs", "total events", "largest run events", "events/shard", "seconds"],
        [
            [
                targets,
                results["committed"],
                len(runs),
                results["total_events"],
                results["largest_run_events"],
                results["events_per_shard"],
                results["seconds"],
            ]
        ],
    )
    shutil.rmtree(tmp, ignore_errors=True)
    return results
