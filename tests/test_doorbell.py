"""A workflow's doorbell: watchers on the worker's machine ask for news when it rang.

Without it a watcher asks the workflow on a timer, twenty times a second while the session
sits idle; with it, an idle session costs its watcher about one query a second, and a
prompt sent from elsewhere still shows at once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.client import Client

from tempi.client import EventFollower, SessionClient
from tempi.client.events import IDLE_ASK_MAX_S, IDLE_GRACE_S
from tempi.store.doorbell import (
    FORGET_AFTER_S,
    RESTART_AT_BYTES,
    Doorbell,
    doorbell_path,
    doorbells_dir,
    prepare,
    ring,
)
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.doorbell_runner import moves_state
from tests.session_harness import (
    CountingHandle,
    Session,
    running_worker,
    scripted_model,
    start_session,
    unique_queue,
)

IDLE_S = 2.0


def test_a_ring_changes_what_watchers_see_even_when_the_file_starts_again(tmp_path: Path) -> None:
    bell = Doorbell(tmp_path / "wf")
    assert bell.state() is None
    ring(bell.path)
    before = bell.state()
    for _ in range(RESTART_AT_BYTES + 2):  # past the point where the file starts again
        ring(bell.path)
        now = bell.state()
        assert now is not None and now != before
        before = now
    assert os.path.getsize(bell.path) <= RESTART_AT_BYTES
    assert os.stat(bell.path).st_mode & 0o777 == 0o600


def test_a_bell_that_cannot_ring_raises_nothing(tmp_path: Path) -> None:
    ring(tmp_path / "missing-folder" / "wf")
    assert not (tmp_path / "missing-folder").exists()


def test_a_starting_worker_forgets_doorbells_silent_for_a_week(tmp_path: Path) -> None:
    old, recent = tmp_path / "old", tmp_path / "recent"
    ring(old)
    ring(recent)
    week_ago = time.time() - FORGET_AFTER_S - 60
    os.utime(old, (week_ago, week_ago))
    prepare(tmp_path)
    assert not old.exists() and recent.exists()


def test_query_eviction_and_replay_activations_do_not_ring() -> None:
    def activation(*variants: str, replaying: bool = False) -> WorkflowActivation:
        act = WorkflowActivation(is_replaying=replaying)
        for variant in variants:
            getattr(act.jobs.add(), variant).SetInParent()
        return act

    assert not moves_state(activation("query_workflow"))
    assert not moves_state(activation("query_workflow", "query_workflow"))
    assert not moves_state(activation("remove_from_cache"))
    assert moves_state(activation("signal_workflow"))
    assert moves_state(activation("query_workflow", "do_update"))
    assert moves_state(activation("resolve_activity"))
    # A query to a workflow out of the cache (or closed) replays its history first.
    assert not moves_state(activation("initialize_workflow", replaying=True))
    assert not moves_state(activation("resolve_activity", replaying=True))


@contextlib.asynccontextmanager
async def _after_one_run(
    tmp_path: Path, client: Client, server: ScriptedLLMServer, scenario: str
) -> AsyncIterator[Session]:
    """A session on a worker of its own that has answered one prompt and is idle."""
    server.add_scenario(scenario, [{"text": "First."}, {"text": "Second."}])
    queue = unique_queue()
    async with running_worker(client, tmp_path / "sessions", queue):
        s = await start_session(client, tmp_path, scripted_model(server, scenario), task_queue=queue)
        await s.prompt("one")
        await s.collect_until(lambda e: e["type"] == "agent_end")
        yield s


def _watcher(
    s: Session, *, own_client: bool, shared: bool = False
) -> tuple[EventFollower, CountingHandle, SessionClient]:
    """A follower of the session, on the client that drives it or on a client of its own."""
    client = (
        s.session
        if own_client
        else SessionClient(s.session.client, s.config.session_id, session_path=s.config.session_path)
    )
    follower = client.follow(shared=shared)
    counting = CountingHandle(follower.handle)
    follower.handle = counting  # type: ignore[assignment]
    return follower, counting, client


async def _watch(
    follower: EventFollower, seen: list[tuple[float, dict[str, Any]]], stop: asyncio.Event
) -> None:
    while not stop.is_set():
        batch = await follower.poll()
        seen.extend((time.monotonic(), event) for event in batch)
        if not batch:
            await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("same_home", "own_client"),
    [(True, False), (False, False), (False, True)],
    ids=["doorbell", "no-doorbell-prompt-elsewhere", "no-doorbell-own-prompt"],
)
async def test_an_idle_watcher_asks_seldom_and_still_sees_the_next_prompt(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    same_home: bool,
    own_client: bool,
) -> None:
    async with _after_one_run(tmp_path, temporal_client, scripted_server, "doorbell") as s:
        if not same_home:  # the watcher's home is not the worker's: no doorbell to look at
            monkeypatch.setenv("TEMPI_HOME", str(tmp_path / "elsewhere"))
        assert doorbell_path(doorbells_dir(), s.handle.id).exists() == same_home
        follower, counting, _ = _watcher(s, own_client=own_client)
        await follower.skip_to_end()
        seen: list[tuple[float, dict[str, Any]]] = []
        stop = asyncio.Event()
        watching = asyncio.create_task(_watch(follower, seen, stop))
        try:
            await asyncio.sleep(IDLE_GRACE_S)  # a run about to start is still asked for
            after_grace = counting.queries
            await asyncio.sleep(IDLE_S)
            idle_queries = counting.queries - after_grace
            # Right after an ask, so that the follower's timer would not ask for a second.
            async with asyncio.timeout(10):
                while counting.queries == after_grace + idle_queries:
                    await asyncio.sleep(0.01)
            sent = time.monotonic()
            await s.prompt("two")  # through the session's own client
            deadline = time.monotonic() + 30
            while not any(e["type"] == "agent_end" for _, e in seen) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        finally:
            stop.set()
            await watching

    types = [e["type"] for _, e in seen]
    assert types[0] == "agent_start" and types[-1] == "agent_end", types
    assert seen[-1][1]["messages"][-1]["content"][0]["text"] == "Second."
    shown_after = seen[0][0] - sent
    # Past the first second: with a doorbell, one ask a second while it stays silent; without,
    # asks 0.05, 0.1, 0.2, 0.4, 0.8 s apart, then a second apart (about 40 on a 0.05 s timer).
    assert idle_queries <= (1 + IDLE_S if same_home else 6), idle_queries
    if same_home or own_client:
        # The doorbell rang, or the follower's own client woke it: well before a second.
        assert shown_after < 0.5, shown_after
    else:
        # Asked by the idle timer, a second at most after the prompt.
        assert shown_after < IDLE_ASK_MAX_S + 0.5, shown_after


async def test_idle_shared_watchers_without_a_doorbell_ask_once_a_second_between_them(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with _after_one_run(tmp_path, temporal_client, scripted_server, "doorbell-shared") as s:
        monkeypatch.setenv("TEMPI_HOME", str(tmp_path / "elsewhere"))  # no doorbell here
        watchers, counts, _ = zip(
            *(_watcher(s, own_client=False, shared=True) for _ in range(5)), strict=True
        )
        seen: list[list[tuple[float, dict[str, Any]]]] = [[] for _ in watchers]
        stop = asyncio.Event()
        tasks = [asyncio.create_task(_watch(w, out, stop)) for w, out in zip(watchers, seen, strict=True)]
        try:
            await asyncio.sleep(IDLE_S)
            idle_queries = sum(c.queries for c in counts)
            await s.prompt("two")
            async with asyncio.timeout(30):
                while not all(
                    any(e["type"] == "agent_end" and "Second." in str(e) for _, e in out) for out in seen
                ):
                    await asyncio.sleep(0.02)
        finally:
            stop.set()
            await asyncio.gather(*tasks)
    # The first watcher's ask for the log so far, then one a second for all five (each
    # backing off on its own, they looked at the shared file about 30 times).
    assert idle_queries <= 2 + IDLE_S, idle_queries
