"""Record the histories of one `tempi pipeline run` for tests/histories: the six-module
fixture of tests/test_pipeline_run.py (a repair, a failed shard, five commits), two shards at
once, on a private dev server with the scripted model.

    uv run python scripts/record_pipeline_history.py tests/histories/NAME [TEMPI_CHECKOUT]

TEMPI_CHECKOUT (default: this one) is the tempi the pipeline runs on, e.g. a worktree of an
older commit (`git worktree add /tmp/before <rev>`), to keep what its workflows did."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

from temporalio.client import WorkflowExecutionStatus

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.dev_server import free_port, start_dev_server
from tempi.workers.temporal_client import connect
from tests.conftest import write_models_json
from tests.histories.capture import save_histories
from tests.test_pipeline_run import MORE_VALUES, VALUES, _routes, make_fixture

API_KEY = "sk-record-not-a-secret"


async def record(out: Path, checkout: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tempi-record-pipeline-"))
    port = free_port()
    proc = start_dev_server(tmp / "temporal.db", port, log_path=tmp / "temporal.log")
    server = ScriptedLLMServer()
    server.start_in_thread()
    try:
        server.add_scenario("pipeline", {"routes": _routes()})
        home = tmp / "home"
        write_models_json(home, server, "pipeline")
        repo = make_fixture(tmp / "repo", {**VALUES, **MORE_VALUES})
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp),
            "TEMPI_HOME": str(home),
            "PI_CODING_AGENT_DIR": str(home / ".no-pi-agent"),
            "MOCK_API_KEY": API_KEY,
            "TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
            "TEMPI_CLIENT_WORKER": "1",
            "PYTHONPATH": str(checkout),
        }
        run = subprocess.run(
            [sys.executable, "-m", "tempi", "pipeline", "run", "pipeline.yaml"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        print(run.stdout[-1500:], run.stderr[-1500:])
        client = await connect(f"127.0.0.1:{port}")
        executions = [w async for w in client.list_workflows("WorkflowType STARTS_WITH 'Pipeline'")]
        executions.sort(key=lambda w: (w.start_time, w.id, w.run_id))
        assert all(w.status != WorkflowExecutionStatus.RUNNING for w in executions)
        written = await save_histories(client, executions, out, "pipeline", API_KEY)
        print(f"{written} histories in {out}")
    finally:
        server.stop_thread()
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    checkout = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parent.parent
    asyncio.run(record(Path(sys.argv[1]), checkout.resolve()))
