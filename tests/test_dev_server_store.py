"""The embedded server's database: it keeps a write-ahead log, and what the server accepted
before it was killed is there when it starts again on the same file."""

from __future__ import annotations

import subprocess
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus

from tempi.workers.dev_server import free_port, start_dev_server
from tempi.workers.temporal_client import retry_while_starting

# SQLite's header: bytes 18 and 19 are the write and read format versions, 2 in WAL mode.
WAL_FORMAT = b"\x02\x02"


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait(10)


async def test_a_workflow_accepted_before_the_server_is_killed_is_there_after_the_restart(
    tmp_path: Path,
) -> None:
    db, log = tmp_path / "temporal.db", tmp_path / "temporal.log"
    port = free_port()
    server = start_dev_server(db, port, log_path=log)
    try:
        # A busy machine: the port may answer before the frontend is healthy.
        client = await retry_while_starting(lambda: Client.connect(f"127.0.0.1:{port}"))
        # No worker polls this queue: the workflow stays as the server stored it.
        handle = await client.start_workflow("NobodyRunsThis", id="kept", task_queue="nobody")
        await handle.signal("note", "sent before the kill")
    finally:
        _kill(server)
    assert db.read_bytes()[18:20] == WAL_FORMAT, "the database is not in write-ahead-log mode"

    server = start_dev_server(db, port, log_path=log)
    try:
        # A busy machine: the port may answer before the frontend is healthy.
        client = await retry_while_starting(lambda: Client.connect(f"127.0.0.1:{port}"))
        handle = client.get_workflow_handle("kept")
        description = await handle.describe()
        assert description.status == WorkflowExecutionStatus.RUNNING
        signals = [
            event.workflow_execution_signaled_event_attributes.signal_name
            async for event in handle.fetch_history_events()
            if event.HasField("workflow_execution_signaled_event_attributes")
        ]
        assert signals == ["note"]
    finally:
        _kill(server)
