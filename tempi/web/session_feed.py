"""One follower per session for every page of this console that watches it.

Following a session costs its worker a query each time its log is read (many a second while
a model streams); were each page its own follower, 20 pages on one session would ask 20
times as often, and the worker would spend more time answering pages than running the turn.
So a feed follows the session once, renders each change once, and hands the same blocks to
every page; a page that joins later starts from the feed's current transcript."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from tempi.cli.server_link import ServerLink
from tempi.client import SessionClient
from tempi.client.history_bell import HISTORY_QUIET_ASK_S
from tempi.client.session_join import join_session
from tempi.client.transcript import context_messages
from tempi.store.session_store import SessionStore
from tempi.store.sidecar import live_dir
from tempi.web.log_pacer import LogPacer
from tempi.web.transcript_view import Op, TranscriptView
from tempi.workers.temporal_client import server_gone

# How often a feed reads a running session's live files (in this process: no query; when
# the log is asked is LogPacer's call), and looks at an idle one's live directory, where a
# run started elsewhere shows first. A control sent from this console wakes its feed at once.
STREAMING_TICK_S = 0.02
IDLE_TICK_S = 0.05
# How often a feed of a session that is not running looks whether it started.
NOT_RUNNING_POLL_S = 2.0
# How often a feed of an idle session asks for its leaf, to see a move in its tree.
LEAF_CHECK_S = 3.0
HEARTBEAT_S = 15.0
# How often a feed tries the Temporal server again while it does not answer.
OUTAGE_POLL_S = 1.0
# A page owed this much (a stalled connection) is owed nothing more: once it reads again it
# is sent the transcript as it stands then. Every change of a streaming message is that whole
# message again, so what a stalled page is owed would grow as the square of the answer.
MAX_BEHIND_BYTES = 1 << 20


class Watcher:
    def __init__(self) -> None:
        self.event = asyncio.Event()
        # The session moved to another branch: its transcript is sent again from the start.
        self.reload = False


class Wakeups:
    """Feeds of a session that a control sent here should wake before their next poll."""

    def __init__(self) -> None:
        self._watchers: dict[str, set[Watcher]] = defaultdict(set)

    @contextlib.contextmanager
    def watching(self, session_id: str) -> Iterator[Watcher]:
        watcher = Watcher()
        self._watchers[session_id].add(watcher)
        try:
            yield watcher
        finally:
            self._watchers[session_id].discard(watcher)
            if not self._watchers[session_id]:
                del self._watchers[session_id]

    def wake(self, session_id: str, *, reload: bool = False) -> None:
        for watcher in self._watchers.get(session_id, ()):
            watcher.reload = watcher.reload or reload
            watcher.event.set()


async def _sleep_or_wake(event: asyncio.Event, seconds: float) -> bool:
    """Whether a control woke the feed before `seconds` were over."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
    woken = event.is_set()
    event.clear()
    return woken


async def is_running(session: SessionClient) -> bool:
    """Whether the session's workflow runs; a server that does not answer raises RPCError
    (SessionClient.is_running would say False, and the page would show it stopped)."""
    try:
        described = await session.handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return described.status == WorkflowExecutionStatus.RUNNING


def encode(ops: list[Op]) -> bytes:
    """Ops as Server-Sent Events; no ops is a heartbeat (a comment line)."""
    if not ops:
        return b": still here\n\n"
    return "".join(f"data: {json.dumps(op, ensure_ascii=False)}\n\n" for op in ops).encode()


class Page:
    """One page's place in a feed: what it has not been sent yet, encoded once for all pages.

    A page that falls behind (its connection takes nothing, its writes wait) drops what it
    is owed and is marked stale; what it is sent next is the feed's snapshot, made when it
    can take it, so the page catches up in one step and holds nothing while it waits."""

    def __init__(self, feed: SessionFeed) -> None:
        self.feed = feed
        self.pending: list[bytes] = []
        self.behind = 0  # bytes in `pending`
        self.stale = False  # owed the whole transcript, as it stands when the page takes it
        self.closed = False  # the feed ended: the page reconnects
        self.ready = asyncio.Event()

    def push(self, data: bytes) -> None:
        if not self.stale and self.behind + len(data) > MAX_BEHIND_BYTES and self.feed.started:
            self.pending, self.behind, self.stale = [], 0, True
        if not self.stale:
            self.pending.append(data)
            self.behind += len(data)
        self.ready.set()

    async def take(self, timeout: float) -> bytes:
        """What to send now; nothing after `timeout`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.ready.wait(), timeout)
        self.ready.clear()
        data = encode(self.feed.snapshot()) if self.stale else b"".join(self.pending)
        self.pending, self.behind, self.stale = [], 0, False
        return data


class SessionFeed:
    """One session followed for all its pages: the transcript as shown now (blocks by key,
    the last state), and the changes broadcast as they come."""

    def __init__(
        self, session: SessionClient, store: SessionStore, link: ServerLink, wakeups: Wakeups
    ) -> None:
        self.session = session
        self.store = store
        self.link = link
        self.wakeups = wakeups
        self.pages: set[Page] = set()
        self.blocks: dict[int, str] = {}
        self.started = False  # a reset was sent: the blocks are a whole transcript
        self.state: Op | None = None
        self.offline = False
        self.task: asyncio.Task[None] | None = None

    def snapshot(self) -> list[Op]:
        """What a page joining now is sent: the transcript as the others show it."""
        if not self.started:
            return []  # the first reset is on its way to every page
        ops: list[Op] = [{"op": "reset"}]
        ops += [{"op": "block", "key": key, "html": html} for key, html in sorted(self.blocks.items())]
        if self.state is not None:
            ops.append(self.state)
        if self.offline:
            ops.append({"op": "offline"})
        return ops

    def broadcast(self, ops: list[Op]) -> None:
        for op in ops:
            kind = op["op"]
            if kind == "offline":
                self.offline = True
                continue
            self.offline = False  # as the page takes any other op: the server answers again
            if kind == "reset":
                self.started, self.blocks, self.state = True, {}, None
            elif kind == "block":
                self.blocks[op["key"]] = op["html"]
            elif kind == "state":
                self.state = op
        data = encode(ops)
        for page in self.pages:
            page.push(data)

    def _gone(self) -> bool:
        return not self.pages

    async def run(self) -> None:
        session = self.session
        with self.wakeups.watching(session.session_id) as watcher:
            try:
                while not self._gone():
                    try:
                        if await is_running(session):
                            async for ops in self._follow(watcher):
                                self.broadcast(ops)
                        elif session.session_path is not None:
                            self.broadcast(await self._from_file(Path(session.session_path)))
                            await self._until_running()
                        else:
                            break  # it ended before saying where its file is: the pages ask again
                    except RPCError as err:
                        if not server_gone(err):
                            raise
                        await self._wait_out_outage()
            except RPCError:
                pass  # the server answered oddly: the pages reconnect
            finally:
                for page in self.pages:
                    page.closed = True
                    page.ready.set()

    async def _wait_out_outage(self) -> None:
        """The Temporal server went away (`tempi server stop --force`, a restart): the pages
        say so and keep their transcript; once the server answers the feed starts again
        from a reset. The SDK's client reconnects by itself."""
        self.broadcast([{"op": "offline"}])
        waited = 0.0
        while not self._gone():
            await self.link.wait_until_up()
            try:
                await is_running(self.session)
                return
            except RPCError as err:
                if not server_gone(err):
                    raise
            await asyncio.sleep(OUTAGE_POLL_S)
            waited += OUTAGE_POLL_S
            if waited >= HEARTBEAT_S:
                self.broadcast([])
                waited = 0.0

    async def _from_file(self, path: Path) -> list[Op]:
        loaded = await asyncio.to_thread(self.store.load, path)
        messages = context_messages(loaded, loaded.tree.leaf_id)
        return [{"op": "reset"}, *TranscriptView().history(messages), {"op": "state", "running": False}]

    async def _until_running(self) -> None:
        waited = 0.0
        while not self._gone() and not await is_running(self.session):
            await asyncio.sleep(NOT_RUNNING_POLL_S)
            waited += NOT_RUNNING_POLL_S
            if waited >= HEARTBEAT_S:
                self.broadcast([])
                waited = 0.0

    async def _follow(self, watcher: Watcher) -> AsyncIterator[list[Op]]:
        """The conversation so far, then its changes as they happen (as `tempi attach`
        shows them: a run under way is replayed from its start). Ends when the session
        moves to another branch, for the caller to start again from there."""
        session = self.session
        watcher.reload = False
        join = await join_session(session, self.store)
        state = join.state
        view = TranscriptView()
        yield [{"op": "reset"}, *view.history(join.messages)]
        session.session_path = state.session_file
        follower = session.follow(from_offset=join.from_offset, subagents=False)
        pacer = LogPacer(live_dir(state.session_file, session.session_id))
        clock = asyncio.get_running_loop()
        streaming: bool | None = None
        quiet = 0.0
        woken = False
        # A move in the tree made elsewhere (a terminal's /tree) writes no event: an idle
        # session's leaf is looked at now and then (see _moved_away).
        known_leaf: str | None = state.leaf_id
        since_leaf_check = 0.0
        leaf_seen = follower.history_seen()
        while not self._gone() and not watcher.reload:
            tick = clock.time()
            # A doorbell (a worker on this machine) says when the log moved, and so does the
            # workflow's history (a worker elsewhere): the follower asks as its bell says.
            # The pacer's slow asks remain for a feed that hears no bell (the history's poll
            # refused).
            woken = woken or follower.bell_rang()
            ask: bool | None = True
            if woken:
                pacer.asked(tick)
            elif follower.hears_bell():
                ask = None
            else:
                ask = pacer.should_ask(
                    tick,
                    log_moved=follower.log_moved,
                    live_moved=follower.live_moved,
                    streaming=bool(streaming),
                )
            batch = await follower.poll(ask=ask)
            for event in batch:
                view.apply(event)
            ops = view.flush()
            page = follower.last_page
            now_streaming = bool(page and page.is_streaming)
            if now_streaming != streaming:
                streaming = now_streaming
                ops.append({"op": "state", "running": True, "streaming": streaming})
            if ops:
                yield ops
                quiet = 0.0
            if batch:
                # The leaf moved with the log: the next look compares the branch itself, or
                # a move back to the leaf it last saw (a run, then /tree) would go unseen.
                known_leaf = None
                continue
            pause = STREAMING_TICK_S if streaming else IDLE_TICK_S
            woken = await _sleep_or_wake(watcher.event, pause)
            quiet += pause
            since_leaf_check += pause
            seen = follower.history_seen()
            leaf_due = since_leaf_check >= LEAF_CHECK_S
            if seen is not None:
                # A move in the tree is a workflow task, so the history moves with it (and
                # beside a doorbell, the ring says it at once).
                leaf_due = seen != leaf_seen or since_leaf_check >= HISTORY_QUIET_ASK_S
            if not streaming and leaf_due:
                since_leaf_check, leaf_seen = 0.0, seen
                # Its end moves the history too (a pipeline's shard done, a session stopped from
                # a terminal): a describe, which the server answers alone, before the query.
                if not await is_running(session):
                    return  # shown from its file
                now = await session.state()
                if now.leaf_id != known_leaf:
                    moved = await asyncio.to_thread(
                        self._moved_away, now.session_file, now.leaf_id, view.shown()
                    )
                    if moved:
                        return
                    if moved is False:
                        known_leaf = now.leaf_id
            if quiet >= HEARTBEAT_S:
                if not await is_running(session):
                    return  # ended (stopped from a terminal): show it from its file
                yield []
                quiet = 0.0

    def _moved_away(self, session_file: str, leaf: str | None, shown: list[tuple[str, int]]) -> bool | None:
        """Whether the page shows another branch than the one ending at `leaf`; None while
        the file does not have `leaf` yet. A branch that only goes on past what the page shows
        is the page's own: a run's first entries reach the file before their events reach
        the page."""
        loaded = self.store.load(Path(session_file))
        if leaf is not None and loaded.tree.get(leaf) is None:
            return None
        return TranscriptView.stamps(context_messages(loaded, leaf))[: len(shown)] != shown


class Feeds:
    """The feeds of this console, by the workflow that runs each session."""

    def __init__(self, store: SessionStore, link: ServerLink, wakeups: Wakeups) -> None:
        self.store = store
        self.link = link
        self.wakeups = wakeups
        self._feeds: dict[str, SessionFeed] = {}

    @contextlib.contextmanager
    def joined(self, session: SessionClient) -> Iterator[Page]:
        """A page on the session's feed (started for its first page, ended after its last)."""
        key = session.handle.id
        feed = self._feeds.get(key)
        if feed is None or feed.task is None or feed.task.done():
            feed = SessionFeed(session, self.store, self.link, self.wakeups)
            self._feeds[key] = feed
        page = Page(feed)
        feed.pages.add(page)
        if feed.started:
            page.push(encode(feed.snapshot()))
        if feed.task is None:
            feed.task = asyncio.create_task(feed.run())
            feed.task.add_done_callback(lambda _: self._forget(key, feed))
        try:
            yield page
        finally:
            feed.pages.discard(page)
            if not feed.pages and feed.task is not None:
                feed.task.cancel()

    def _forget(self, key: str, feed: SessionFeed) -> None:
        if self._feeds.get(key) is feed:
            del self._feeds[key]

    async def close(self) -> None:
        tasks = [feed.task for feed in self._feeds.values() if feed.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
