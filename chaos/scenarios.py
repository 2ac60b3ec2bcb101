"""The fault scenarios. Each takes the rig and a seeded random source, injects its fault
into a scripted session, and raises ChaosFailure when an invariant breaks. Each returns
a one-line note of what happened (where the fault landed, how the session ended)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.rig import MODEL_ID, PROVIDER, clean_env, tempi_command, write_models_json
from chaos.checks import ChaosFailure, check_script_followed, check_session, check_workspace
from chaos.rig import (
    ChaosRig,
    ChaosSession,
    entry_count,
    scripted_steps,
    session_events,
    start_session,
    wait_entries,
    wait_finished,
)
from tempi.activities.llm.contract import SDK_RETRIES

STEPS = 30
# Lines a 30-step session writes: header, model and thinking entries, the prompt, two
# per step and the answer.
SESSION_LINES = 4 + 2 * STEPS + 1

Scenario = Callable[[ChaosRig, random.Random], Awaitable[str]]


def _verify(session: ChaosSession, steps: int = STEPS) -> str:
    facts = check_session(session.path)
    check_workspace(facts, session.cwd)
    check_script_followed(facts, steps)
    return facts.ended


async def worker_sigkill(rig: ChaosRig, rng: random.Random) -> str:
    """SIGKILL the worker at a random point of a 30-step session, start a new one."""
    run_dir = rig.run_dir("sigkill")
    queue = f"chaos-{uuid.uuid4().hex[:8]}"
    scenario = f"sigkill-{uuid.uuid4().hex[:6]}"
    rig.llm.add_scenario(scenario, scripted_steps(STEPS))
    worker = rig.worker(run_dir, queue).start()
    try:
        session = await start_session(rig, run_dir, scenario, queue)
        at = rng.randint(1, SESSION_LINES - 3)
        reached = await wait_entries(session.path, at, 120)
        await asyncio.sleep(rng.uniform(0, 0.08))
        lines_at_kill = entry_count(session.path)
        worker.kill()
        worker = rig.worker(run_dir, queue).start()
        await wait_finished(session, 180)
    finally:
        worker.stop()
    ended = _verify(session)
    where = f"killed at line {lines_at_kill}" if reached else "session ended before the kill"
    return f"{where}; {ended}"


async def server_restart(rig: ChaosRig, rng: random.Random) -> str:
    """Stop the Temporal dev server mid-session and start it again on the same db and port."""
    if rig.dev is None:
        return "skipped: the rig does not own its Temporal server"
    run_dir = rig.run_dir("restart")
    queue = f"chaos-{uuid.uuid4().hex[:8]}"
    scenario = f"restart-{uuid.uuid4().hex[:6]}"
    rig.llm.add_scenario(scenario, scripted_steps(STEPS))
    worker = rig.worker(run_dir, queue).start()
    try:
        session = await start_session(rig, run_dir, scenario, queue)
        at = rng.randint(1, SESSION_LINES - 3)
        await wait_entries(session.path, at, 120)
        kill = rng.random() < 0.5
        await asyncio.to_thread(rig.dev.stop, kill=kill)
        down_s = rng.uniform(0.5, 3)
        await asyncio.sleep(down_s)
        await asyncio.to_thread(rig.dev.start)
        await wait_finished(session, 180)
    finally:
        worker.stop()
    ended = _verify(session)
    how = "SIGKILL" if kill else "SIGTERM"
    return f"server {how} at line {at}, down {down_s:.1f} s; {ended}"


async def llm_drop(rig: ChaosRig, rng: random.Random) -> str:
    """The model's stream is cut after a few chunks on several turns; each is retried."""
    run_dir = rig.run_dir("drop")
    queue = f"chaos-{uuid.uuid4().hex[:8]}"
    scenario = f"drop-{uuid.uuid4().hex[:6]}"
    dropped = sorted(rng.sample(range(STEPS), 3))
    extra = {i: {"drop_after_chunks": rng.randint(0, 4)} for i in dropped}
    rig.llm.add_scenario(scenario, scripted_steps(STEPS, extra))
    worker = rig.worker(run_dir, queue).start()
    try:
        session = await start_session(rig, run_dir, scenario, queue)
        await wait_finished(session, 120)
        events = await session_events(session)
    finally:
        worker.stop()
    ended = _verify(session)
    retries = [e for e in events if e["type"] == "auto_retry_start"]
    if ended == "completed" and len(retries) != len(dropped):
        raise ChaosFailure(f"{len(dropped)} streams were cut but {len(retries)} retries were announced")
    return f"cut turns {dropped}; {len(retries)} retries; {ended}"


async def llm_error_bursts(rig: ChaosRig, rng: random.Random) -> str:
    """429, 500 and 529 bursts the retries absorb, then one they cannot: the session must
    finish in the first case and end with a clear error in the second. As in pi, the
    provider SDK retries a failed request itself first; only a burst longer than that
    becomes one of the agent's announced retries."""
    run_dir = rig.run_dir("bursts")
    queue = f"chaos-{uuid.uuid4().hex[:8]}"
    ok_scenario = f"bursts-{uuid.uuid4().hex[:6]}"
    statuses = [429, 500, 529]
    hit = sorted(rng.sample(range(STEPS), 3))
    per_attempt = SDK_RETRIES + 1
    extra = {
        i: {"fail_times": rng.randint(1, 2 * per_attempt), "fail_status": statuses[n]}
        for n, i in enumerate(hit)
    }
    rig.llm.add_scenario(ok_scenario, scripted_steps(STEPS, extra))
    bad_scenario = f"bursts-fatal-{uuid.uuid4().hex[:6]}"
    fatal_turn = rng.randint(0, 9)
    fatal_status = rng.choice(statuses)
    rig.llm.add_scenario(
        bad_scenario, scripted_steps(10, {fatal_turn: {"fail_times": 50, "fail_status": fatal_status}})
    )
    worker = rig.worker(run_dir, queue).start()
    try:
        ok = await start_session(rig, run_dir / "ok", ok_scenario, queue)
        bad = await start_session(rig, run_dir / "bad", bad_scenario, queue)
        await wait_finished(ok, 120)
        await wait_finished(bad, 120)
        ok_events = await session_events(ok)
    finally:
        worker.stop()
    ok_end = _verify(ok)
    if ok_end != "completed":
        raise ChaosFailure(f"bursts within the retry budget ended the session: {ok_end}")
    failed = sum(v["fail_times"] for v in extra.values())
    expected = sum(v["fail_times"] // per_attempt for v in extra.values())
    retries = sum(1 for e in ok_events if e["type"] == "auto_retry_start")
    if retries != expected:
        raise ChaosFailure(
            f"{failed} failed requests ({SDK_RETRIES} retried by the SDK each time) "
            f"should announce {expected} retries, not {retries}"
        )
    facts = check_session(bad.path)
    check_workspace(facts, bad.cwd)
    if not facts.ended.startswith("failed") or str(fatal_status) not in facts.ended:
        raise ChaosFailure(
            f"a burst past the retry budget should end with the HTTP error; got {facts.ended!r}"
        )
    return f"statuses {statuses} at turns {hit} absorbed ({failed} failures, {retries} agent retries); fatal {fatal_status}: {facts.ended[:80]}"


async def disk_full(rig: ChaosRig, rng: random.Random) -> str:
    """The session file's file system fills up mid-session (a small tmpfs). Then space is
    freed. The file must never hold a torn or repeated entry; the session must say what
    went wrong while the disk is full and go on (or fail clearly) once space is back."""
    run_dir = rig.run_dir("diskfull")
    mount = run_dir / "disk"
    mount.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], check=True, capture_output=True
        )
    except (OSError, subprocess.CalledProcessError) as err:
        return f"skipped: cannot mount a tmpfs ({err})"
    queue = f"chaos-{uuid.uuid4().hex[:8]}"
    scenario = f"diskfull-{uuid.uuid4().hex[:6]}"
    rig.llm.add_scenario(scenario, scripted_steps(STEPS))
    worker = rig.worker(run_dir, queue).start()
    filler = mount / "filler"
    try:
        session = await start_session(rig, run_dir, scenario, queue, session_dir=mount / "sessions")
        at = rng.randint(3, SESSION_LINES // 2)
        await wait_entries(session.path, at, 60)
        _fill(filler)
        # Give the session time to hit the wall and say so.
        stalled_at = entry_count(session.path)
        await asyncio.sleep(6)
        during = await session_events(session)
        visible_errors = [e for e in during if _mentions_disk_error(e)]
        desc = await session.handle.describe()
        pending_failures = [
            p.last_failure.message
            for p in (desc.raw_description.pending_activities or [])
            if p.HasField("last_failure")
        ]
        check_session_partial(session.path)
        filler.unlink()
        await wait_finished(session, 120)
        ended = _verify(session)
    finally:
        worker.stop()
        subprocess.run(["umount", "--lazy", str(mount)], check=False, capture_output=True)
    if not visible_errors:
        raise ChaosFailure(
            f"the disk filled at line {stalled_at}; for 6 s the session's events said nothing "
            f"(the worker kept retrying: {pending_failures[:1]}); after space was freed: {ended}"
        )
    return f"disk full at line {stalled_at}; error shown: {_event_text(visible_errors[0])[:80]}; then {ended}"


def _fill(path: Path) -> None:
    """Write zeros until the file system refuses."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def _event_text(event: dict[str, object]) -> str:
    return json.dumps(event)[:300]


def _mentions_disk_error(event: dict[str, object]) -> bool:
    text = json.dumps(event).lower()
    return "no space" in text or "enospc" in text or ("disk" in text and "full" in text)


def check_session_partial(path: Path) -> None:
    """While a session runs: every line so far is JSON and no entry is there twice."""
    from chaos.checks import read_session

    entries = read_session(path)
    ids = [e.get("id") for e in entries[1:]]
    if len(ids) != len(set(ids)):
        raise ChaosFailure(f"{path.name}: an entry was written twice")


GARBAGE_LINES: list[bytes] = [
    b"this is not json",
    b"{",
    b"[]",
    b'"a string"',
    b"42",
    b'{"type": 5}',
    b'{"id": "x1", "type": "no_such_command"}',
    b"\xff\xfe\x00garbage\x80\x81",
    b"{" + b'"type":"prompt","message":"' + b"A" * 200 + b"\xc3\x28" + b'"}',
    b"\x00" * 1000,
    b'{"id":"big1","type":"nonsense","payload":"' + b"x" * (8 * 1024 * 1024) + b'"}',
    b"y" * (16 * 1024 * 1024),
]


async def rpc_garbage(rig: ChaosRig, rng: random.Random) -> str:
    """Garbage, invalid UTF-8 and oversized lines on `tempi --mode rpc`'s stdin: each gets
    an error response, and the process keeps serving real commands."""
    run_dir = rig.run_dir("rpc")
    scenario = f"rpc-{uuid.uuid4().hex[:6]}"
    rig.llm.add_scenario(scenario, [{"text": "Hello over RPC."}])
    home = run_dir / "home"
    write_models_json(home, rig.llm.base_url, scenario)
    lines = list(GARBAGE_LINES)
    rng.shuffle(lines)
    proc = await asyncio.create_subprocess_exec(
        *tempi_command("--mode", "rpc", "--provider", PROVIDER, "--model", MODEL_ID),
        cwd=run_dir,
        env=clean_env(home, rig.address),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=64 * 1024 * 1024,
    )
    assert proc.stdin is not None and proc.stdout is not None
    out: list[dict[str, object]] = []

    async def read_until(pred: Callable[[dict[str, object]], bool], timeout_s: float) -> dict[str, object]:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChaosFailure(
                    f"no expected RPC output within {timeout_s} s; got {[o.get('type') for o in out[-6:]]}"
                )
            try:
                raw = await asyncio.wait_for(proc.stdout.readline(), remaining)
            except TimeoutError:
                continue
            if not raw:
                raise ChaosFailure(f"tempi --mode rpc exited (code {await proc.wait()})")
            message = json.loads(raw)
            out.append(message)
            if pred(message):
                return message

    try:
        started = time.monotonic()
        for line in lines:
            proc.stdin.write(line + b"\n")
        proc.stdin.write(b'{"id":"state1","type":"get_state"}\n')
        await proc.stdin.drain()
        await read_until(lambda m: m.get("id") == "state1", 60)
        errors = [m for m in out if m.get("type") == "response" and m.get("success") is False]
        if len(errors) != len(lines):
            raise ChaosFailure(
                f"{len(lines)} bad lines but {len(errors)} error responses: {[m.get('error') for m in errors][:4]}"
            )
        proc.stdin.write(b'{"id":"p1","type":"prompt","message":"say hello"}\n')
        await proc.stdin.drain()
        await read_until(lambda m: m.get("type") == "agent_end", 60)
        text = [m for m in out if m.get("type") == "message_end"]
        if "Hello over RPC." not in json.dumps(text):
            raise ChaosFailure("the prompt after the garbage did not get the scripted answer")
        elapsed = time.monotonic() - started
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    shutil.rmtree(run_dir, ignore_errors=True)
    return f"{len(lines)} bad lines answered with errors, then a prompt worked ({elapsed:.1f} s)"


SCENARIOS: dict[str, Scenario] = {
    "worker-sigkill": worker_sigkill,
    "server-restart": server_restart,
    "llm-drop": llm_drop,
    "llm-error-bursts": llm_error_bursts,
    "disk-full": disk_full,
    "rpc-garbage": rpc_garbage,
}

# Each run of a scenario must end within this many seconds.
TIME_LIMIT_S: dict[str, float] = {
    "worker-sigkill": 240,
    "server-restart": 240,
    "llm-drop": 150,
    "llm-error-bursts": 200,
    "disk-full": 200,
    "rpc-garbage": 150,
}
