"""How many workflows `tempi slack` keeps open, and what the Temporal server holds, after a
workspace's bot has seen many threads (issue 37, item 10).

    uv run python scripts/slack_idle_threads.py --threads 10000 --idle-close 20

A dev server, the scripted Slack server and the Slack worker (with tempi's real activities)
run here; each thread gets one message (`@mom stop`: the conversation workflow starts and
answers `_Nothing running_`, no model call), then the script reports the running workflows
and the server's memory once all threads are seen and again once they stayed idle past
`--idle-close` (0: the conversations stay open, the behaviour before)."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from slack_sdk.web.async_client import AsyncWebClient

from tempi.activities.slack import SlackActivities
from tempi.agent.model_spec import ModelSpec
from tempi.client import SessionService
from tempi.client.options import SessionOptions
from tempi.store.session_store import SessionStore
from tempi.testing.slack_server import ScriptedSlackServer
from tempi.workers.dev_server import free_port, start_dev_server
from tempi.workers.temporal_client import connect
from tempi.workers.worker import build_slack_worker
from tempi.workflows.slack_conversation_workflow import SlackConversationWorkflow
from tempi.workflows.slack_types import (
    SlackConversationInput,
    SlackMessage,
    conversation_workflow_id,
    slack_task_queue,
)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def main(threads: int, idle_close: float, concurrency: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tempi-idle-") as tmp:
        root = Path(tmp)
        workdir = root / "mom"
        workdir.mkdir()
        port = free_port()
        server = start_dev_server(root / "temporal.db", port, die_with_parent=True)
        try:
            client = await connect(f"127.0.0.1:{port}")
            async with ScriptedSlackServer() as slack:
                channel = slack.add_channel("busy")
                web = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
                options = SessionOptions(
                    cwd=str(workdir), model=ModelSpec(id="m", api="faux", provider="faux")
                )
                service = SessionService(client, SessionStore(root / "sessions"))
                activities = SlackActivities(service, options, web)
                queue = slack_task_queue(str(workdir))
                async with build_slack_worker(client, queue, activities.all()):
                    before = rss_mib(server.pid)
                    started = time.monotonic()
                    gate = asyncio.Semaphore(concurrency)

                    async def thread(i: int) -> None:
                        ts = f"{1_700_000_000 + i}.000100"
                        msg = SlackMessage(
                            channel=channel,
                            ts=ts,
                            user="U1",
                            user_name="u",
                            text="stop",
                            stamp="2026-01-01 00:00:00+00:00",
                        )
                        inp = SlackConversationInput(
                            working_dir=str(workdir), channel=channel, root_ts=ts, idle_close_s=idle_close
                        )
                        async with gate:
                            await client.start_workflow(
                                SlackConversationWorkflow.run,
                                inp,
                                id=conversation_workflow_id(str(workdir), channel, ts),
                                task_queue=queue,
                                start_signal="message",
                                start_signal_args=[msg],
                            )

                    await asyncio.gather(*(thread(i) for i in range(threads)))
                    while sum(1 for a in slack.actions if a.kind == "post") < threads:
                        await asyncio.sleep(0.5)
                    seen_s = time.monotonic() - started
                    running = (await client.count_workflows('ExecutionStatus = "Running"')).count
                    print(
                        f"{threads} threads seen in {seen_s:.0f}s: {running} workflows running, "
                        f"server RSS {before:.0f} -> {rss_mib(server.pid):.0f} MiB"
                    )
                    if idle_close > 0:
                        while (await client.count_workflows('ExecutionStatus = "Running"')).count > 0:
                            await asyncio.sleep(1)
                        print(
                            f"after {time.monotonic() - started:.0f}s (idle close {idle_close:.0f}s): 0 running, "
                            f"server RSS {rss_mib(server.pid):.0f} MiB"
                        )
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=10_000)
    p.add_argument("--idle-close", type=float, default=20.0)
    p.add_argument("--concurrency", type=int, default=20)
    args = p.parse_args()
    asyncio.run(main(args.threads, args.idle_close, args.concurrency))
