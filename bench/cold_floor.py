"""The floor under a cold start on Temporal: one Python process starts the dev server, a
worker and one workflow whose activity streams the scripted model through the OpenAI SDK,
and prints a line at the first token. No tempi code runs, and it keeps none of tempi's
guarantees (no session file, no isolation, no service that outlives the terminal), so it is
what any Temporal-Python agent pays before its first token on this machine.

Run as `python -m bench.cold_floor DIR BASE_URL`; `bench startup` times it from spawn."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from tempi.workers.dev_server import dev_server_args, free_port, temporal_binary


async def main(directory: Path, base_url: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    # Not waited for: it boots while this process loads the SDK, as tempi's service does.
    server = subprocess.Popen(
        [*dev_server_args(temporal_binary(), directory / "temporal.db", port), "--headless"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        from temporalio.client import Client
        from temporalio.worker import Worker

        from bench.cold_floor_workflow import FirstToken, stream_first_token

        while True:
            try:
                client = await Client.connect(f"127.0.0.1:{port}")
                break
            except RuntimeError:
                await asyncio.sleep(0.01)
        async with Worker(
            client, task_queue="floor", workflows=[FirstToken], activities=[stream_first_token]
        ):
            await client.execute_workflow(FirstToken.run, base_url, id="floor", task_queue="floor")
    finally:
        server.terminate()
        server.wait(20)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
