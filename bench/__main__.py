"""`python -m bench [which ...] [--quick] [--profile]`: run benchmarks, print tables, write
JSON under bench/results/."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from bench import (
    abort,
    context,
    durable_peers,
    history,
    overhead,
    pipeline,
    startup,
    throughput,
    watchers,
    web,
)
from bench.report import machine, write_results

BENCHMARKS: dict[str, Callable[[bool, bool], Coroutine[Any, Any, dict[str, Any]]]] = {
    "overhead": overhead.run,
    "history": history.run,
    "throughput": throughput.run,
    "startup": startup.run,
    "pipeline": pipeline.run,
    "context": context.run,
    "abort": abort.run,
    "watchers": watchers.run,
    "web": web.run,
}
# Run only when named: they install third-party frameworks into venvs of their own.
OPTIONAL: dict[str, Callable[[bool, bool], Coroutine[Any, Any, dict[str, Any]]]] = {
    "peers": durable_peers.run,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="tempi benchmarks on loopback: orchestration overhead (vs a plain loop and vs pi), "
        "workflow history size, concurrent throughput, cold and warm start, a 1,000-target pipeline, "
        "the context rebuilt per model call at turn 10, 100 and 1,000, Esc while a command runs (beside pi), "
        "tempi web's delta latency and the worker's CPU with 20 SSE clients on one session, "
        "and what 0, 1 and 20 watchers (EventFollower) cost a turn. "
        "Not run unless named: `peers`, tempi's time per turn beside Temporal's OpenAI Agents integration, "
        "pydantic-ai's TemporalAgent and pi on one dev server and scripted model, with the Temporal round trip "
        "beside it; it installs each peer at pinned versions with uv into a venv of its own, cached under "
        "$TEMPI_BENCH_PEERS_DIR (default ~/.cache/tempi-bench/peers).",
        epilog="With PYTHONDONTWRITEBYTECODE set, every tempi process compiles each module it imports "
        "(~0.4 s a start here); unset it to time start-up and whole sessions as an installed tempi runs.",
    )
    parser.add_argument(
        "which",
        nargs="*",
        choices=[*BENCHMARKS, *OPTIONAL, []],
        help="benchmarks to run (default: all but peers)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smaller sizes: 200-turn history, N = 1 and 10, a 200-target pipeline, 10 turns a peers run",
    )
    parser.add_argument(
        "--profile", action="store_true", help="run the worker under cProfile and print where time goes"
    )
    args = parser.parse_args(argv)
    chosen = args.which or list(BENCHMARKS)
    m = machine()
    print(f"machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, Python {m['python']}")
    failed = []
    for name in chosen:
        try:
            results = asyncio.run({**BENCHMARKS, **OPTIONAL}[name](args.quick, args.profile))
        except Exception as err:  # one broken benchmark must not hide the others' numbers
            print(f"\n{name}: FAILED: {type(err).__name__}: {err}", file=sys.stderr)
            failed.append(name)
            continue
        path = write_results(name, {"quick": args.quick, **results})
        print(f"  -> {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
