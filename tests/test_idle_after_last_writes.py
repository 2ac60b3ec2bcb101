"""A watcher waiting for the session to be idle (`tempi -p`) returns once the run's last
writes are done: a script or `pi -c` reading the session right after finds the whole run in
the file and nothing left in its live folder."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from tempi.store.sidecar import live_dir
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows import activity_names as names
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue


class SlowFlush(Interceptor):
    """The flush after a run takes a second, as on a loaded machine or a slow disk."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        class _Slow(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                if activity.info().activity_type == names.FLUSH_ENTRIES:
                    await asyncio.sleep(1.0)
                return await super().execute_activity(input)

        return _Slow(next)


async def test_an_idle_wait_returns_with_the_run_in_the_file_and_its_live_files_gone(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    # Streamed in pieces, so the model calls write live files, which the flush removes.
    ls = {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}], "chunk_size": 8}
    scripted_server.add_scenario("whole", [ls, {"text": "All done here.", "chunk_size": 4}])
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue, activity_hook=SlowFlush()):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "whole"), task_queue=queue
        )
        await s.prompt("What is here?")
        events = await s.run_to_idle()
        live = live_dir(s.config.session_path, s.config.session_id)
        left = sorted(p.name for p in live.iterdir()) if live.is_dir() else []
        entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()]

    assert events[-1]["type"] == "agent_end"
    assert left == []
    last = entries[-1]["message"]
    assert last["role"] == "assistant" and last["content"][0]["text"] == "All done here."
