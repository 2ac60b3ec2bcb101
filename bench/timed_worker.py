"""tempi's worker, exactly as `tempi worker` builds it, plus a log of when every activity
ran: one JSON line per activity with its workflow id, type, whether it ran as a local
activity, and its wall-clock start and end.
It says it polls once the default model's SDK is loaded, as a `tempi worker` has after its
first seconds.
Optionally under cProfile, written out when the worker is stopped with SIGTERM.

Run as `python -m bench.timed_worker --task-queue Q --timings FILE [--profile FILE]`."""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from tempi.activities.tool_handoff import ToolHandoff, own_queue
from tempi.config.paths import default_sessions_root
from tempi.workers.provider_preload import preload_default_provider
from tempi.workers.temporal_client import configured_address, connect
from tempi.workers.worker import build_handoff_worker, build_worker, session_activities


class ActivityTimings(Interceptor):
    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        out = self.out

        class _Timed(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                info = activity.info()
                start = time.time()
                try:
                    return await super().execute_activity(input)
                finally:
                    record = {
                        "wf": info.workflow_id,
                        "type": info.activity_type,
                        "attempt": info.attempt,
                        "local": info.is_local,
                        "start": start,
                        "end": time.time(),
                    }
                    out.write(json.dumps(record) + "\n")
                    out.flush()

        return _Timed(next)


async def _serve(task_queue: str, timings: Path) -> None:
    address = configured_address()
    if address is None:
        raise SystemExit("set TEMPORAL_ADDRESS")
    client = await connect(address)
    with open(timings, "a") as out:
        timed = ActivityTimings(out)
        handoff = ToolHandoff(session_activities(default_sessions_root(), None), own_queue(task_queue))
        worker = build_worker(
            client,
            task_queue=task_queue,
            sessions_root=default_sessions_root(),
            activity_hook=timed,
            handoff=handoff,
        )
        handoff_worker = build_handoff_worker(client, handoff, timed, timedelta(0))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        async with worker, handoff_worker:
            # `tempi worker` loads the default model's SDK in the background once it polls; the
            # benchmarks time a worker that has done so, not its one-time import.
            await preload_default_provider()
            print(f"timed worker: polling {task_queue} on {address}", file=sys.stderr, flush=True)
            await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.timed_worker")
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--timings", type=Path, required=True)
    parser.add_argument("--profile", type=Path, default=None, help="write cProfile stats here on exit")
    args = parser.parse_args()
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    try:
        asyncio.run(_serve(args.task_queue, args.timings))
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(str(args.profile))


if __name__ == "__main__":
    main()
