"""`python -m chaos [--runs N] [scenario ...]`: run fault scenarios against a private
Temporal dev server and scripted model on loopback; print a pass table."""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.report import print_table, write_results
from bench.rig import DevServer
from chaos.checks import ChaosFailure
from chaos.rig import ChaosRig
from chaos.scenarios import SCENARIOS, TIME_LIMIT_S
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.temporal_client import connect


async def run_scenario(rig: ChaosRig, name: str, seed: int) -> tuple[bool, str, float]:
    """(passed, note, seconds) of one bounded run."""
    started = time.monotonic()
    try:
        note = await asyncio.wait_for(SCENARIOS[name](rig, random.Random(seed)), TIME_LIMIT_S[name])
        return True, note, time.monotonic() - started
    except ChaosFailure as err:
        return False, str(err), time.monotonic() - started
    except TimeoutError:
        return False, f"did not finish within {TIME_LIMIT_S[name]} s", time.monotonic() - started
    except Exception as err:
        return False, f"{type(err).__name__}: {err}", time.monotonic() - started


async def main_async(names: list[str], runs: int, seed: int, keep: bool) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="tempi-chaos-"))
    llm = ScriptedLLMServer()
    llm.start_in_thread()
    dev = DevServer(tmp / "temporal")
    dev.start()
    table = []
    details: dict[str, list[dict[str, object]]] = {}
    try:
        rig = ChaosRig(
            directory=tmp, address=dev.address, client=await connect(dev.address), llm=llm, dev=dev
        )
        for name in names:
            passed = 0
            details[name] = []
            for n in range(runs):
                ok, note, seconds = await run_scenario(rig, name, seed + n)
                passed += ok
                details[name].append({"run": n, "passed": ok, "seconds": round(seconds, 1), "note": note})
                print(f"  {name} #{n + 1}: {'pass' if ok else 'FAIL'} ({seconds:.1f} s) {note}", flush=True)
            times = [d["seconds"] for d in details[name]]
            table.append([name, f"{passed}/{runs}", max(times)])  # type: ignore[type-var]
    finally:
        dev.stop()
        llm.stop_thread()
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
    print_table("Chaos scenarios", ["scenario", "passed", "slowest run s"], table)
    path = write_results("chaos", {"runs": runs, "seed": seed, "scenarios": details})
    print(f"  -> {path}")
    return 0 if all(d["passed"] for runs_ in details.values() for d in runs_) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chaos", description="Fault injection for tempi sessions (loopback only)."
    )
    parser.add_argument(
        "scenarios", nargs="*", choices=[*SCENARIOS, []], help="scenarios to run (default: all)"
    )
    parser.add_argument("--runs", type=int, default=20, help="runs of each scenario (default 20)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first run; run n uses seed + n")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs, session files)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return asyncio.run(main_async(args.scenarios or list(SCENARIOS), args.runs, args.seed, args.keep))


if __name__ == "__main__":
    sys.exit(main())
