"""Watchers on one machine share one query stream per session.

Each watcher that asks the workflow for new log events on its own costs the session's
worker a query a poll, so twenty `tempi attach` windows cost twenty times one. Shared
followers take turns asking and pass the answer on through a file beside the session; each
must still see exactly the events a follower asking on its own sees.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tempi.client import EventFollower, SessionClient
from tempi.store.sidecar import shared_events_dir
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.session_harness import (
    CountingHandle,
    Session,
    running_worker,
    scripted_model,
    start_session,
    unique_queue,
)

# Updates come from the live files each follower reads itself, as fast as it polls, so
# their number varies; what they add up to is compared instead.
PER_READ = {"message_update", "tool_execution_update"}
WATCHERS = 5


def _scenario(server: ScriptedLLMServer, name: str, command: str) -> None:
    words = " ".join(f"w{i}" for i in range(60))
    server.add_scenario(
        name,
        [
            {
                "text": f"Running it. {words}",
                "chunk_size": 8,
                "chunk_delay_ms": 5,
                "tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": command}}],
            },
            {"text": f"Done. {words}", "chunk_size": 8, "chunk_delay_ms": 5},
        ],
    )


def _counted(follower: EventFollower) -> CountingHandle:
    counting = CountingHandle(follower.handle)
    follower.handle = counting  # type: ignore[assignment]
    return counting


async def _to_idle(follower: EventFollower) -> list[dict[str, Any]]:
    return [e async for e in follower.events(until_idle=True)]


def _log_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] not in PER_READ]


def _streamed_text(events: list[dict[str, Any]]) -> list[str]:
    """Each assistant message's text as its deltas spelled it."""
    texts: list[str] = []
    for e in events:
        if e["type"] == "message_start" and e["message"]["role"] == "assistant":
            texts.append("")
        elif e["type"] == "message_update" and e["assistantMessageEvent"]["type"] == "text_delta":
            texts[-1] += e["assistantMessageEvent"]["delta"]
    return texts


def _shared(s: Session) -> EventFollower:
    return SessionClient(s.session.client, s.config.session_id, session_path=s.config.session_path).follow(
        shared=True
    )


def _assert_same_stream(got: list[dict[str, Any]], direct: list[dict[str, Any]]) -> None:
    assert _log_events(got) == _log_events(direct)
    assert _streamed_text(got) == _streamed_text(direct)


async def test_shared_watchers_see_every_event_for_one_query_stream(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    _scenario(scripted_server, "shared-watchers", "sleep 0.5; echo hi")
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "shared-watchers"), task_queue=queue
        )
        direct = _counted(s.follower)
        watchers = [_shared(s) for _ in range(WATCHERS)]
        counts = [_counted(w) for w in watchers]
        await s.prompt("Run it.")
        direct_events, *shared_events = await asyncio.wait_for(
            asyncio.gather(_to_idle(s.follower), *(_to_idle(w) for w in watchers)), 60
        )

    types = [e["type"] for e in _log_events(direct_events)]
    assert types.count("message_end") == 4  # user, assistant, tool result, assistant
    assert "tool_execution_end" in types and types[-1] == "agent_end"
    assert direct_events[-1]["messages"][-1]["content"][0]["text"].startswith("Done.")
    for events in shared_events:
        _assert_same_stream(events, direct_events)
    # Five watchers asking on their own ask several times what one does (fewer than five
    # here, where they share one event loop with the worker); taking turns, the five ask
    # about as often as one alone (a turn falls due on whichever polls first: a bit more).
    shared_queries = sum(c.queries for c in counts)
    # (A run of a few polls leaves a turn or two over on a loaded machine: the slack below.)
    assert shared_queries < 2 * direct.queries + 2, (
        shared_queries,
        direct.queries,
        [c.queries for c in counts],
    )


_CHILD = textwrap.dedent(
    """
    import asyncio, json, sys
    from tempi.client import SessionClient
    from tempi.workers.temporal_client import connect

    async def main() -> None:
        client = await connect(sys.argv[1])
        follower = SessionClient(client, sys.argv[2], session_path=sys.argv[3]).follow(shared=True)
        print("ready", flush=True)
        while True:
            for event in await follower.poll():
                print(json.dumps(event), flush=True)
            await asyncio.sleep(0.05)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("doorbell", [True, False], ids=["doorbell", "no-doorbell"])
async def test_a_watcher_killed_mid_run_leaves_the_others_whole(
    tmp_path: Path,
    temporal_client: Client,
    temporal_address: str,
    scripted_server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    doorbell: bool,
) -> None:
    _scenario(scripted_server, f"shared-watcher-killed-{doorbell}", "sleep 1; echo hi")
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        if not doorbell:  # the watchers' home is not the worker's: they ask, taking turns
            monkeypatch.setenv("TEMPI_HOME", str(tmp_path / "elsewhere"))
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, f"shared-watcher-killed-{doorbell}"),
            task_queue=queue,
        )
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CHILD,
            temporal_address,
            s.config.session_id,
            s.config.session_path,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        )
        assert child.stdout is not None
        try:
            assert await asyncio.wait_for(child.stdout.readline(), 30) == b"ready\n"
            staying = _shared(s)
            await s.prompt("Run it.")
            direct_run = asyncio.ensure_future(_to_idle(s.follower))
            staying_run = asyncio.ensure_future(_to_idle(staying))
            # Both watchers take turns asking until the command starts; then one is killed.
            child_seen: list[dict[str, Any]] = []
            while not child_seen or child_seen[-1]["type"] != "tool_execution_start":
                child_seen.append(json.loads(await asyncio.wait_for(child.stdout.readline(), 30)))
        finally:
            if child.returncode is None:
                os.kill(child.pid, signal.SIGKILL)
            await child.wait()
        # One that comes after it reads what the killed one wrote, from the start.
        late = _shared(s)
        direct_events, staying_events, late_events = await asyncio.wait_for(
            asyncio.gather(direct_run, staying_run, _to_idle(late)), 60
        )
        log_end = (await s.session.read_events(0)).next_offset

    assert _log_events(child_seen) == _log_events(direct_events)[: len(_log_events(child_seen))]
    assert [e["type"] for e in _log_events(direct_events)][-2:] == ["turn_end", "agent_end"]
    _assert_same_stream(staying_events, direct_events)
    _assert_same_stream(late_events, direct_events)
    # Whoever asked, before the kill and after, each event went into the shared file once
    # (from the first shared ask on: polls before the session's file existed asked alone).
    # Where the worker's doorbell carried the events, nobody may have needed to ask for any.
    shared_files = list(shared_events_dir(s.config.session_path, s.config.session_id).glob("*.jsonl"))
    assert len(shared_files) == 1 or (doorbell and not shared_files), shared_files
    lines = [json.loads(line) for f in shared_files for line in f.read_text().splitlines()]
    offsets = [line["o"] for line in lines if "o" in line]
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets))) if offsets else doorbell
    if not doorbell:
        assert offsets[-1] == log_end - 1


async def test_a_watcher_that_cannot_make_the_shared_file_asks_on_its_own(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    """Where the shared file cannot be made (the session's folder is a team cluster's, not
    this machine's; a read-only disk), watching goes on with asks of its own. Here a file
    stands where the shared folder would be."""
    _scenario(scripted_server, "shared-watcher-unshared", "echo hi")
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "shared-watcher-unshared"),
            task_queue=queue,
        )
        blocked = shared_events_dir(s.config.session_path, s.config.session_id)
        blocked.parent.mkdir(parents=True, exist_ok=True)
        blocked.write_text("not a folder\n")
        watcher = _shared(s)
        await s.prompt("Run it.")
        direct_events, watched = await asyncio.wait_for(
            asyncio.gather(_to_idle(s.follower), _to_idle(watcher)), 60
        )
    _assert_same_stream(watched, direct_events)
    assert blocked.is_file()
