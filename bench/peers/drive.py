"""`python -m bench.peers.drive APP --address HOST:PORT --prompt TEXT [--prompt TEXT ...]`:
start a worker for one peer's agent on the given Temporal server, run one workflow per
prompt, one after the other, and print one JSON line per run.

APP is a module of this package with `WORKFLOW` (its `run` takes the prompt and returns
the final answer), `client_plugins()` and `worker_options()`. The model is whatever the
peer's OpenAI client finds in OPENAI_BASE_URL and OPENAI_API_KEY: the scripted server."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import time
import uuid

from temporalio.client import Client
from temporalio.worker import Worker


async def drive(app_name: str, address: str, prompts: list[str]) -> None:
    app = importlib.import_module(f"bench.peers.{app_name}")
    client = await Client.connect(address, plugins=app.client_plugins())
    queue = f"bench-{app_name}-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, **app.worker_options()):
        for number, prompt in enumerate(prompts):
            start = time.perf_counter()
            output = await client.execute_workflow(
                app.WORKFLOW.run, prompt, id=f"{queue}-{number}", task_queue=queue
            )
            record = {"prompt": prompt, "output": output, "seconds": round(time.perf_counter() - start, 3)}
            print(json.dumps(record), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.drive")
    parser.add_argument("app", help="a module of bench.peers, e.g. openai_agents_app")
    parser.add_argument("--address", required=True, help="the Temporal server, HOST:PORT")
    parser.add_argument("--prompt", action="append", required=True, help="one run's prompt; repeatable")
    args = parser.parse_args()
    asyncio.run(drive(args.app, args.address, args.prompt))


if __name__ == "__main__":
    sys.exit(main())
