"""A workflow's doorbell: watchers on the worker's machine ask for news when it rang.

Without it a watcher asks the workflow on a timer, twenty times a second while the session
sits idle; with it, an idle session costs its watcher about one query a second, and a
prompt sent from elsewhere still shows at once."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from tempi.cli.server_link import ServerLink
from tempi.client import EventFollower, SessionClient
from tempi.client.events import IDLE_ASK_MAX_S, IDLE_GRACE_S
from tempi.client.history_bell import HistoryBell
from tempi.store import doorbell
from tempi.store.doorbell import (
    FORGET_AFTER_S,
    QUIET_ASK_S,
    Doorbell,
    doorbell_path,
    doorbells_dir,
    prepare,
    ring,
)
from tempi.store.doorbell_feed import FIRST_LOOK_BYTES, BellFeed, ring_lines
from tempi.store.session_store import SessionStore
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.web.session_feed import LEAF_CHECK_S, Feeds, Page, Wakeups
from tempi.workers.doorbell_runner import DoorbellInstance, moves_state
from tempi.workers.wrapped_runner import WrappedInstance
from tempi.workflows.watcher_view import WatcherView, publish
from tests.session_harness import (
    CountingHandle,
    Session,
    running_worker,
    scripted_model,
    start_session,
    unique_queue,
)

IDLE_S = 2.0


def test_a_ring_changes_what_watchers_see_even_when_the_file_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doorbell, "RESTART_AT_BYTES", 64)
    bell = Doorbell(tmp_path / "wf")
    feed = BellFeed(bell.path)
    assert bell.state() is None
    ring(bell.path)
    before = bell.state()
    for end in range(1, 40):  # past the point where the file starts again, more than once
        ring(bell.path, ring_lines(end, busy=True, first=end - 1, events=[{"n": end}]))
        now = bell.state()
        assert now is not None and now != before
        before = now
        if end % 3 == 0:  # a watcher looking now and then misses nothing but across a restart
            feed.read_new()
            fed = feed.page_from(end - 1)
            assert fed is not None and fed.events == [{"n": end}], (end, fed)
    assert os.path.getsize(bell.path) <= 64 + 80
    assert os.stat(bell.path).st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wf"]


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


def test_a_feed_hands_out_only_events_that_join_up_with_the_state_after_them(tmp_path: Path) -> None:
    path = tmp_path / "wf"
    feed = BellFeed(path)
    feed.read_new()
    assert feed.page_from(0) is None  # no doorbell yet: ask
    ring(path, ring_lines(2, busy=True))  # nobody listened: the state alone
    feed.read_new()
    assert feed.page_from(0) is None  # events 0 and 1 are not in it
    assert feed.page_from(2) == ([], 2, True)  # but it says there is nothing past 2
    ring(path, ring_lines(4, busy=True, first=2, events=[{"i": 2}, {"i": 3}]))
    with open(path, "ab") as fh:  # a ring half written
        fh.write(ring_lines(5, busy=False, first=4, events=[{"i": 4}])[:12])
    feed.read_new()
    assert feed.page_from(2) == ([{"i": 2}, {"i": 3}], 4, True)
    with open(path, "ab") as fh:
        fh.write(ring_lines(5, busy=False, first=4, events=[{"i": 4}])[12:])
    feed.read_new()
    assert feed.page_from(4) == ([{"i": 4}], 5, False)
    ring(path, ring_lines(9, busy=True, first=7, events=[{"i": 7}, {"i": 8}]))  # 5 and 6 missing
    feed.read_new()
    assert feed.page_from(5) is None
    ring(path, b"not a ring\n")  # another writer's format: nothing is known
    feed.read_new()
    assert feed.page_from(9) is None
    ring(path, ring_lines(10, busy=False, first=9, events=[{"i": object()}]))  # not JSON: left out
    feed.read_new()
    assert feed.page_from(9) is None and feed.page_from(10) == ([], 10, False)


def test_a_feed_tells_moves_in_the_tree_from_the_leaf_moving_with_the_log(tmp_path: Path) -> None:
    path = tmp_path / "wf"
    feed = BellFeed(path)
    ring(path, ring_lines(2, busy=False, leaf="e1"))
    ring(path, ring_lines(3, busy=True, leaf="e2", first=2, events=[{"i": 2}]))  # a turn's entry
    ring(path, ring_lines(3, busy=False, leaf="e2"))  # the run ended
    feed.read_new()
    assert feed.tree_moves == 0
    ring(path, ring_lines(3, busy=False, leaf="e1"))  # /tree back to the first entry
    feed.read_new()
    assert feed.tree_moves == 1 and feed.page_from(3) == ([], 3, False)
    ring(path, b"not a ring\n")
    ring(path, ring_lines(3, busy=False, leaf="e2"))  # after a line it cannot read: no telling
    feed.read_new()
    assert feed.tree_moves == 1
    ring(path, ring_lines(3, busy=False, leaf=None))  # to the root (before the first entry)
    feed.read_new()
    assert feed.tree_moves == 2


def test_a_feed_opened_on_a_long_doorbell_reads_only_its_newest_rings(tmp_path: Path) -> None:
    path = tmp_path / "wf"
    big = "x" * 1000
    for end in range(1, 2 * FIRST_LOOK_BYTES // 1000):
        ring(path, ring_lines(end, busy=True, first=end - 1, events=[{"big": big}]))
    feed = BellFeed(path)
    feed.read_new()
    fed = feed.page_from(end - 5)
    assert fed is not None and len(fed.events) == 5
    assert feed.page_from(0) is None


class _FakeInstance(WrappedInstance):
    """Stands for the sandbox's instance: each activation runs `step` as workflow code would."""

    def __init__(self) -> None:
        self.step: Any = lambda: None

    def activate(self, act: WorkflowActivation) -> Any:
        self.step()
        return None


class _Log:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.busy = False
        self.leaf: str | None = None

    def watcher_view(self) -> WatcherView:
        return len(self.events), self.busy, self.leaf

    def watched_events(self, from_offset: int) -> tuple[int, list[dict[str, Any]]]:
        return from_offset, self.events[from_offset:]


def test_a_worker_rings_when_the_log_moved_with_its_events_while_someone_listens(tmp_path: Path) -> None:
    task = WorkflowActivation()
    task.jobs.add().resolve_activity.SetInParent()
    inner, log = _FakeInstance(), _Log()
    instance = DoorbellInstance(inner, tmp_path / "wf")

    def rings() -> list[dict[str, Any]]:
        return [json.loads(line) for line in (tmp_path / "wf").read_text().splitlines()]

    inner.step = lambda: publish(log)  # the workflow's init
    instance.activate(task)
    inner.step = lambda: None
    instance.activate(task)  # a task that moved nothing
    assert rings() == [{"n": 0, "s": False, "l": None}]
    inner.step = lambda: log.events.append({"i": 0})
    instance.activate(task)  # nobody listens: the state alone
    assert rings()[-1] == {"n": 1, "s": False, "l": None}
    Doorbell(tmp_path / "wf").listen(0.0)
    inner.step = lambda: log.events.extend([{"i": 1}, {"i": 2}])
    instance.activate(task)
    assert rings()[-3:] == [
        {"o": 1, "e": {"i": 1}},
        {"o": 2, "e": {"i": 2}},
        {"n": 3, "s": False, "l": None},
    ]
    inner.step = lambda: setattr(log, "busy", True)  # busy, no new event
    instance.activate(task)
    assert rings()[-1] == {"n": 3, "s": True, "l": None} and len(rings()) == 6
    inner.step = lambda: setattr(log, "leaf", "a1b2c3d4")  # a move in the tree, no new event
    instance.activate(task)
    assert rings()[-1] == {"n": 3, "s": True, "l": "a1b2c3d4"} and len(rings()) == 7

    other = DoorbellInstance(_FakeInstance(), tmp_path / "other")  # publishes nothing
    other.activate(task)
    other.activate(task)
    assert (tmp_path / "other").read_text() == ".\n.\n"


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
        await _settled(s)
        yield s


async def _settled(s: Session) -> None:
    """Until the run's last tasks (the file's flush after its end) are done: the workflow's
    history stops growing."""
    async with asyncio.timeout(10):
        while True:
            raw = (await s.handle.describe()).raw_description
            if not raw.pending_activities and not raw.HasField("pending_workflow_task"):
                return
            await asyncio.sleep(0.02)


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


async def _watch_one_run(
    s: Session, prompt: str
) -> tuple[list[tuple[float, dict[str, Any]]], CountingHandle]:
    """What a watcher on its own client saw of the run `prompt` started, and its queries."""
    watcher, counting, _ = _watcher(s, own_client=False)
    seen: list[tuple[float, dict[str, Any]]] = []
    stop = asyncio.Event()
    watching = asyncio.create_task(_watch(watcher, seen, stop))
    try:
        await s.prompt(prompt)
        async with asyncio.timeout(30):
            while not any(e["type"] == "agent_end" for _, e in seen):
                await asyncio.sleep(0.02)
    finally:
        stop.set()
        await watching
    return seen, counting


def refuse_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """History polls fail, as against a server that refuses them: followers have no bell."""

    async def refused(_: HistoryBell) -> bool:
        raise RPCError("history reads are not allowed here", RPCStatusCode.PERMISSION_DENIED, b"")

    monkeypatch.setattr(HistoryBell, "_follow_run", refused)


@pytest.mark.parametrize(
    ("bell", "own_client"),
    [("doorbell", False), ("silent-doorbell", False), ("history", False), ("none", False), ("none", True)],
    ids=["doorbell", "silent-doorbell", "history", "no-bell-prompt-elsewhere", "no-bell-own-prompt"],
)
async def test_an_idle_watcher_asks_seldom_and_still_sees_the_next_prompt(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    bell: str,
    own_client: bool,
) -> None:
    async with _after_one_run(tmp_path, temporal_client, scripted_server, "doorbell") as s:
        if bell != "doorbell":  # the watcher's home is not the worker's: no doorbell to look at
            monkeypatch.setenv("TEMPI_HOME", str(tmp_path / "elsewhere"))
        if bell == "silent-doorbell":  # one its worker rang before it moved to a worker elsewhere
            doorbells_dir().mkdir(parents=True)
            ring(doorbell_path(doorbells_dir(), s.handle.id))
        assert doorbell_path(doorbells_dir(), s.handle.id).exists() == bell.endswith("doorbell")
        follower, counting, _ = _watcher(s, own_client=own_client)
        if bell == "none":
            refuse_history(monkeypatch)
        await follower.skip_to_end()
        seen: list[tuple[float, dict[str, Any]]] = []
        stop = asyncio.Event()
        watching = asyncio.create_task(_watch(follower, seen, stop))
        try:
            await asyncio.sleep(IDLE_GRACE_S)  # a run about to start is still asked for
            after_grace = counting.queries
            await asyncio.sleep(IDLE_S)
            idle_queries = counting.queries - after_grace
            if bell == "none":
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
    # Past the first second: none with a bell (while a doorbell stays silent the follower
    # looks whether the history grew, a describe, each second: it asked then, one query a
    # second); with no bell, asks 0.05, 0.1, 0.2, 0.4, 0.8 s apart, then a second apart
    # (about 40 on a 0.05 s timer).
    assert idle_queries <= (6 if bell == "none" else 0), idle_queries
    if bell == "doorbell" or own_client:
        # The doorbell rang, or the follower's own client woke it: well before a second.
        assert shown_after < 0.5, shown_after
    elif bell == "silent-doorbell":
        # The look a second at most after found the history grown (then an ask, which a
        # loaded machine has taken 0.8 s to answer).
        assert shown_after < QUIET_ASK_S + 1.0, shown_after
    else:
        # The history moved (0.15 s in a quiet run; what tells it from a timer is that it
        # asked nothing while idle), or the idle timer asked, a second at most after.
        assert shown_after < IDLE_ASK_MAX_S + 1.0, shown_after


@pytest.mark.parametrize("bell", ["doorbell", "history"])
async def test_a_waiting_watcher_is_woken_by_its_bell_not_by_its_timer(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    bell: str,
) -> None:
    async with _after_one_run(tmp_path, temporal_client, scripted_server, f"wake-{bell}") as s:
        if bell == "history":
            monkeypatch.setenv("TEMPI_HOME", str(tmp_path / "elsewhere"))  # no doorbell here
        follower, _, _ = _watcher(s, own_client=False)
        await follower.skip_to_end()
        await follower.poll()
        async with asyncio.timeout(10):
            while follower.history_seen() is None or await follower.wait_for_news(0.3):
                await follower.poll()  # what is known before the prompt, seen
        await s.prompt("two")  # through the session's own client: nothing wakes this one
        async with asyncio.timeout(20):
            # A timer would end this wait after a minute.
            assert await follower.wait_for_news(timeout=60) is True
            seen: list[dict[str, Any]] = []
            while not any(e["type"] == "agent_end" for e in seen):
                seen.extend(await follower.poll())
                if not seen or seen[-1]["type"] != "agent_end":
                    await follower.wait_for_news(timeout=60)
    assert seen[0]["type"] == "agent_start"
    assert seen[-1]["messages"][-1]["content"][0]["text"] == "Second."


@pytest.mark.parametrize("bell", ["doorbell", "history", "none"])
async def test_idle_shared_watchers_ask_seldom_between_them(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    bell: str,
) -> None:
    async with _after_one_run(tmp_path, temporal_client, scripted_server, f"shared-{bell}") as s:
        if bell != "doorbell":
            monkeypatch.setenv("TEMPI_HOME", str(tmp_path / "elsewhere"))  # no doorbell here
        watchers, counts, _ = zip(
            *(_watcher(s, own_client=False, shared=True) for _ in range(5)), strict=True
        )
        if bell == "none":
            refuse_history(monkeypatch)
        seen: list[list[tuple[float, dict[str, Any]]]] = [[] for _ in watchers]
        stop = asyncio.Event()
        tasks = [asyncio.create_task(_watch(w, out, stop)) for w, out in zip(watchers, seen, strict=True)]
        try:
            await asyncio.sleep(IDLE_GRACE_S)  # the first asks for the log so far
            settled = sum(c.queries for c in counts)
            await asyncio.sleep(IDLE_S)
            idle_queries = sum(c.queries for c in counts) - settled
            sent = time.monotonic()
            await s.prompt("two")
            async with asyncio.timeout(30):
                while not all(
                    any(e["type"] == "agent_end" and "Second." in str(e) for _, e in out) for out in seen
                ):
                    await asyncio.sleep(0.02)
        finally:
            stop.set()
            await asyncio.gather(*tasks)
    shown_after = max(min(at for at, _ in out if at >= sent) for out in seen) - sent
    if bell != "none":
        # Nothing rang and the history did not move, so nobody asked (with a doorbell, one
        # of them looked at the history's length each second).
        assert idle_queries == 0, idle_queries
    else:
        # One ask a second for all five (each backing off on its own, they looked at the
        # shared file about 20 times).
        assert idle_queries <= 1 + IDLE_S, idle_queries
    # A bell: at once (0.1-0.2 s in a quiet run). The timer: a second at most, and then an
    # ask, which a loaded machine has taken 0.8 s to answer.
    assert shown_after < IDLE_ASK_MAX_S + (0.5 if bell != "none" else 1.0), shown_after


LOG_EVENTS = {"agent_start", "turn_start", "message_start", "message_end"}
LOG_EVENTS |= {"tool_execution_start", "tool_execution_end", "turn_end", "agent_end"}


async def test_a_watcher_on_the_workers_machine_reads_a_run_from_its_rings(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    # Commands past their first 0.25 s move from a local activity to a regular one: a
    # workflow task that changes nothing a watcher reads, so it rings nobody.
    bash = {"name": "bash", "arguments": {"command": "sleep 0.4; echo slow-done"}}
    scripted_server.add_scenario(
        "doorbell-bash",
        [{"tool_calls": [bash]}, {"tool_calls": [bash]}, {"tool_calls": [bash]}, {"text": "Ran it."}],
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "doorbell-bash"), task_queue=queue
        )
        bell = doorbell_path(doorbells_dir(), s.handle.id)
        seen, counting = await _watch_one_run(s, "run it")
        logged = (await s.session.read_events(0)).events  # asked of the workflow itself
        history = await s.handle.fetch_history()
    kinds = [event.WhichOneof("attributes") for event in history.events]
    tasks = kinds.count("workflow_task_completed_event_attributes")
    states = [json.loads(line) for line in bell.read_text().splitlines() if '"n":' in line]
    rings = len(states)
    assert kinds.count("activity_task_scheduled_event_attributes") >= 3  # the commands were handed off
    # Each ring says something the one before did not (the last: the run's writes are done).
    assert all(a != b for a, b in itertools.pairwise(states)), states
    assert states[-1]["s"] is False and rings <= tasks, (rings, tasks)
    # The watcher saw the whole log, in order, having asked for it only now and then: at its
    # start and when the rings fell silent for a second (the first model call).
    assert [e["type"] for _, e in seen if e["type"] in LOG_EVENTS] == [e["type"] for e in logged]
    assert [e for _, e in seen if e["type"] == "tool_execution_end"] == [
        e for e in logged if e["type"] == "tool_execution_end"
    ]
    assert seen[-1][1]["messages"][-1]["content"][0]["text"] == "Ran it."
    assert counting.queries <= rings // 2, (counting.queries, rings)


async def test_a_watcher_elsewhere_asks_nothing_while_a_model_streams(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # About 2 s of streaming: nothing a query answers changes until the answer is in.
    text = " ".join(f"w{i}" for i in range(100))
    scripted_server.add_scenario("stream-elsewhere", [{"text": text, "chunk_size": 4, "chunk_delay_ms": 20}])
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "stream-elsewhere"), task_queue=queue
        )
        monkeypatch.setenv("TEMPI_HOME", str(tmp_path / "elsewhere"))  # no doorbell here
        seen, counting = await _watch_one_run(s, "Say the words.")
    started = next(
        at for at, e in seen if e["type"] == "message_start" and e["message"]["role"] == "assistant"
    )
    ended = next(at for at, e in seen if e["type"] == "message_end" and e["message"]["role"] == "assistant")
    assert seen[-1][1]["messages"][-1]["content"][0]["text"] == text
    # Asked when the prompt's task, the model call's end and the run's end completed (a
    # few more when a task completed during an ask); on a timer it asked every 50 ms
    # while the model streamed.
    assert counting.queries <= 12, (counting.queries, round(ended - started, 2))


def _page_ops(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: ")]


ENDED = "(the session ended)"


async def _read_page(page: Page, shown: list[tuple[float, dict[int, str]]], stop: asyncio.Event) -> None:
    """What the page shows (its blocks by key, and ENDED once it says the session ended),
    each time it changed."""
    blocks: dict[int, str] = {}
    while not stop.is_set():
        ops = _page_ops(await page.take(0.05))
        for op in ops:
            if op["op"] == "reset":
                blocks = {}
            elif op["op"] == "block":
                blocks[op["key"]] = op["html"]
            elif op["op"] == "state" and not op["running"]:
                blocks[-1] = ENDED
        if ops:
            shown.append((time.monotonic(), dict(blocks)))


async def _shown(shown: list[tuple[float, dict[int, str]]], test: Any, after: float) -> float:
    """When the page first showed blocks passing `test` at or after `after`."""
    async with asyncio.timeout(20):
        while True:
            at = next((at for at, blocks in shown if at >= after and test(" ".join(blocks.values()))), None)
            if at is not None:
                return at
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("bell", ["doorbell", "history"])
async def test_a_console_page_asks_nothing_of_an_idle_session_and_follows_it(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    bell: str,
) -> None:
    """`tempi web` beside the worker, or on another machine (its own container on a team's
    cluster): the workflow's doorbell or history tells its feed when to ask, a prompt and a
    move in the tree made from a terminal included."""
    async with _after_one_run(tmp_path, temporal_client, scripted_server, f"console-{bell}") as s:
        if bell == "history":
            monkeypatch.setenv("TEMPI_HOME", str(tmp_path / "elsewhere"))  # no doorbell here
        console = SessionClient(s.session.client, s.config.session_id, session_path=s.config.session_path)
        counting = CountingHandle(console.handle)
        console.handle = counting  # type: ignore[assignment]
        feeds = Feeds(SessionStore(tmp_path / "sessions"), ServerLink(), Wakeups())
        shown: list[tuple[float, dict[int, str]]] = []
        stop = asyncio.Event()
        with feeds.joined(console) as page:
            reading = asyncio.create_task(_read_page(page, shown, stop))
            try:
                await _shown(shown, lambda text: "First." in text, 0.0)
                await asyncio.sleep(IDLE_GRACE_S)
                settled = counting.queries
                await asyncio.sleep(IDLE_S + 2 * LEAF_CHECK_S)
                idle_queries = counting.queries - settled

                sent = time.monotonic()
                await s.prompt("two")
                answered = await _shown(shown, lambda text: "Second." in text, sent)
                await s.collect_until(lambda e: e["type"] == "agent_end")  # a run refuses a move

                first_answer = next(
                    e["id"]
                    for e in map(json.loads, Path(s.config.session_path).read_text().splitlines()[1:])
                    if e.get("type") == "message" and "First." in json.dumps(e["message"])
                )
                moved = time.monotonic()
                await s.session.navigate(first_answer, first_answer)
                back = await _shown(shown, lambda text: "First." in text and "Second." not in text, moved)

                shut = time.monotonic()
                await s.session.shutdown()  # as a pipeline's shard ends, or `tempi server stop`
                ended = await _shown(shown, lambda text: ENDED in text, shut)
            finally:
                stop.set()
                await reading
        await feeds.close()
    # The feed's own timers asked for the log every 2 s and for the leaf every 3 s (6 asks in
    # these 8 s); nothing rang and the history did not move, so nothing was asked.
    assert idle_queries == 0, idle_queries
    # The doorbell rang, or the history moved: 0.1-0.2 s in a quiet run.
    assert answered - sent < (0.5 if bell == "doorbell" else 1.5), answered - sent
    # A move in the tree adds nothing to the log, but rings the doorbell (which said only the
    # log's state before: the look at the history a second after saw it, 1.1 s in a quiet
    # run) and moves the history. The feed used to look at the leaf every 3 s, and missed a
    # move back to the leaf it had last seen (here: before the run) for good.
    assert back - moved < (0.5 if bell == "doorbell" else 1.5), back - moved
    # The end moves the history, which the page's feed looks at (beside a doorbell, after a
    # second of silence); it used to find out at its 15 s heartbeat.
    assert ended - shut < (QUIET_ASK_S + 2.0 if bell == "doorbell" else 1.5), ended - shut
