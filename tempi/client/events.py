"""Turns a session's event log plus its live side channel into pi's event stream.

The workflow's log holds message-level events; token deltas and bash output arrive
through the live files. This merges both, in pi's order, for any client at any offset.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from tempi.client.history_bell import HistoryBell, from_history, history_bell, quiet_ask_s
from tempi.client.history_mark import HistoryMark, history_mark
from tempi.client.live_streams import AssistantStream, ToolStream
from tempi.client.shared_events import IDLE_ASK_MAX_S, SharedEventLog, chain_id
from tempi.store.doorbell import BellState, watcher_doorbell
from tempi.store.doorbell_feed import BellFeed
from tempi.store.file_watch import NewsWaker
from tempi.store.live_channel import LiveReader
from tempi.store.sidecar import live_dir, live_path, shared_events_dir
from tempi.workflows.session_types import EventsPage, workflow_id_for
from tempi.workflows.session_workflow import AgentSessionWorkflow

SessionHandle = WorkflowHandle[AgentSessionWorkflow, Any]

# How long a follower waits for news before it looks anyway; beside the worker a write to
# the doorbell or a live file ends the wait at once (file_watch.py).
POLL_INTERVAL_S = 0.05
# A live file (a model's tokens, a command's output) is written many times a turn: a write
# wakes its watchers this much later, so that the writes meanwhile, and often the ring at the
# call's end, make one look rather than one each (each look costs this process ~1 ms).
LIVE_WAKE_S = 0.02
# Without a bell (no doorbell file here, and the history's long poll failing), the log of a
# session idle this long (no run, no events, nothing sent by the follower's own client) starts
# being asked less and less often (IDLE_ASK_MAX_S): a run about to start (a prompt just
# accepted) is still found at the next poll.
IDLE_GRACE_S = 1.0
# Without a bell, while only the live files bring news (a model streaming), the log is asked
# again at most this often: callers poll again at once after any news, and each ask is a
# query that the session's worker answers, so a token stream would otherwise become hundreds
# of queries a second per watcher, taking the worker's time from the turns it runs. Any
# other poll asks at once, so a prompt's first events are not held back.
QUERY_EVERY_S = 0.02


class EventFollower:
    """The event stream of one session from `from_offset` on. The handle is not pinned to
    a run, so the offsets (global to the session) carry across continue-as-new.

    `shared`: read new log events from the file the session's watchers on this machine
    share (shared_events.py), so they cost the worker one query stream between them
    rather than one each; needs the session's file path.

    Where the workflow's worker shares this process's home, the log is read from the
    workflow's doorbell when it rang (doorbell_feed.py) and asked only when the rings do not
    cover what this follower lacks, or when a second of silence ends with the workflow's
    history grown (a describe, no query: history_mark.py). Elsewhere the workflow's
    history is the bell (history_bell.py): the log is asked when a workflow task completed.
    With neither (the history's poll failing), an idle session is asked less and less often
    (IDLE_ASK_MAX_S) until `wake` or news."""

    def __init__(
        self,
        handle: SessionHandle,
        session_path: str | None,
        session_id: str,
        *,
        from_offset: int = 0,
        live: bool = True,
        client: Client | None = None,
        tag: dict[str, str] | None = None,
        shared: bool = False,
        history_client: Client | None = None,
        parent_waker: NewsWaker | None = None,
    ) -> None:
        """`history_client`: the client `handle` is of, to follow the workflow's history
        where no doorbell rings (without one, such a follower asks on its timer).
        `parent_waker`: a subagent's follower wakes its parent's waits too."""
        self.handle = handle
        self.history_client = history_client or client
        self.shared = shared and session_path is not None
        self._shared_log: SharedEventLog | None = None
        self.client = client  # with a client, subagents' events are followed too
        self.tag = tag
        self.children: dict[str, EventFollower] = {}
        self.adopted: set[str] = set()
        self.session_path = session_path
        self.session_id = session_id
        self.offset = from_offset
        self.live = live
        self.assistant: AssistantStream | None = None
        self.tools: dict[str, ToolStream] = {}
        self.last_page: EventsPage | None = None
        self._asked_at = 0.0
        self._bell = watcher_doorbell(handle.id)
        self._feed = BellFeed(self._bell.path) if self._bell is not None else None
        self._waker = NewsWaker(self, also=parent_waker)
        if self._bell is not None:
            self._waker.watch(self._bell.path.parent, self._bell.path.name)
        if live and session_path is not None:
            self._waker.watch(live_dir(session_path, session_id), after=LIVE_WAKE_S)
        self._history: tuple[HistoryBell, Callable[[], None]] | None = None  # while no doorbell file
        self._bell_asked: BellState = None  # the bell as it was when the log was last asked
        self._mark: HistoryMark | None = None  # the history at the last look of a silent doorbell
        self._mark_looked_at = 0.0
        self._idle_wait = 0.0  # without a bell: how long an idle session's log is left unasked
        self._news_at = time.monotonic()  # the last ask that found a run or events, or a wake
        self._woken = False
        self._log_moved = False  # the last ask brought events: more are likely at once
        self._live_moved = False  # the last poll read deltas from a live file
        self.run_start: int | None = None
        self.run_messages: list[dict[str, Any]] = []

    def _reader(self, key: str | None) -> LiveReader | None:
        if not self.live or key is None or self.session_path is None:
            return None
        return LiveReader(live_path(self.session_path, self.session_id, key))

    def _translate(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        key = event.pop("_live", None)
        kind = event["type"]
        message = event.get("message") or {}
        if kind == "message_start" and message.get("role") == "assistant":
            self.assistant = AssistantStream(message, self._reader(key))
            return [event]
        if kind == "message_end" and message.get("role") == "assistant":
            out = self.assistant.finish(message) if self.assistant else []
            self.assistant = None
            return [*out, event]
        if kind == "tool_execution_update":
            self._adopt_children(event)
        if kind == "tool_execution_start":
            self.tools[event["toolCallId"]] = ToolStream(event, self._reader(key))
            return [event]
        if kind == "tool_execution_end":
            stream = self.tools.pop(event["toolCallId"], None)
            return [*(stream.drain() if stream else []), event]
        return [event]

    async def _run_messages_since(self, start: int, end: int) -> list[dict[str, Any]]:
        """The messages of a run this follower joined late, read back from the log."""
        messages: list[dict[str, Any]] = []
        offset = start
        while offset < end:
            page = await self._read_events(offset)
            if not page.events:
                break
            for i, event in enumerate(page.events):
                if page.next_offset - len(page.events) + i >= end:
                    return messages
                if event["type"] == "message_end":
                    messages.append(event["message"])
            offset = page.next_offset
        return messages

    async def _read_events(self, offset: int) -> EventsPage:
        while True:
            try:
                page: EventsPage = await self.handle.query(AgentSessionWorkflow.read_events, offset)
                return page
            except RPCError as err:
                # CANCELLED: the query went unanswered, because the worker holding the
                # workflow died or the server is shutting down. Asking again reaches a new
                # worker; a server that is gone fails the next call as UNAVAILABLE.
                if err.status != RPCStatusCode.CANCELLED:
                    raise
            await asyncio.sleep(POLL_INTERVAL_S)

    @property
    def log_moved(self) -> bool:
        """The last ask of the log brought events (more are likely at once)."""
        return self._log_moved

    @property
    def live_moved(self) -> bool:
        """The last poll read deltas or output from a live file."""
        return self._live_moved

    def _bell_state(self) -> BellState:
        """The doorbell's state, or the history's where no worker rings a doorbell here."""
        door = self._bell.state() if self._bell is not None else None
        if door is not None:
            if self._history is not None:  # the doorbell came after the first look
                self._history[1]()
                self._history = None
            return door
        if self.history_client is None:
            return None
        if self._history is None:
            self._history = history_bell(self.history_client, self.handle.id, self)
            self._history[0].wakers.add(self._waker)
        return self._history[0].state()

    def hears_bell(self) -> bool:
        """Whether a bell tells this follower when to ask (a doorbell here, or the history)."""
        return self._bell_state() is not None

    def history_seen(self) -> tuple[int, ...] | None:
        """What this follower last saw of the workflow's history: it moves with every
        workflow task the workflow completes, a move in its tree too, which adds nothing to
        the log. The history bell's state; beside a doorbell, the history's length at the
        last look (history_mark.py) and the moves in the tree its rings told of; None when
        neither is known."""
        bell = self._bell_state()
        if from_history(bell):
            return bell
        if bell is None or self._mark is None or self._feed is None:
            return None
        return (*self._mark, self._feed.tree_moves)

    def wake(self) -> None:
        """Something was just sent to the session: the next poll asks for its effect."""
        self._woken = True
        self._news_at = time.monotonic()
        self._waker.wake()

    async def wait_for_news(self, timeout: float = POLL_INTERVAL_S) -> bool:
        """Between polls that found nothing: until the doorbell rings, a live file is written,
        the history's bell moves or `wake` (True), or `timeout` (False)."""
        return await self._waker.wait(timeout)

    def bell_rang(self) -> bool:
        """The workflow's doorbell rang since the log was last asked (never without one)."""
        bell = self._bell_state()
        return bell is not None and bell != self._bell_asked

    def _due(self, now: float, bell: BellState) -> bool:
        """Whether a poll not told whether to ask the log does (see the constants above)."""
        page = self.last_page
        if self._woken or page is None:
            return True
        if bell is not None:
            looked_at = max(self._asked_at, self._mark_looked_at)
            return bell != self._bell_asked or now - looked_at >= quiet_ask_s(bell)
        if not page.is_streaming and not self._live_moved:
            return now - self._asked_at >= self._idle_wait
        # Only a poll right after one that found nothing in the log but deltas in the live
        # file waits its turn to ask: that is the loop a stream would otherwise spin.
        streaming_only = self._live_moved and not self._log_moved
        return not streaming_only or now - self._asked_at >= QUERY_EVERY_S

    def _silence_only(self, bell: BellState) -> bool:
        """Whether a due ask is due only to the doorbell's silence (see history_mark.py)."""
        return (
            bell is not None
            and not from_history(bell)
            and bell == self._bell_asked
            and not self._woken
            and self.last_page is not None
        )

    async def _history_grew(self, now: float) -> bool:
        """Whether the workflow's history grew since the last look (asking costs its worker a
        query; looking costs the server a describe)."""
        self._mark_looked_at = now
        try:
            mark = await self._look()
        except RPCError:
            return True  # the ask says what is wrong
        grew, self._mark = mark != self._mark, mark
        return grew

    async def _look(self) -> HistoryMark:
        return await history_mark(self.handle)

    async def poll(self, *, ask: bool | None = None) -> list[dict[str, Any]]:
        """New events: from the log when this poll asks the worker for them (`ask`, or by
        default as `_due` says), and from the live files (read here, at no worker's cost)."""
        now = asyncio.get_running_loop().time()
        if self._bell is not None:
            self._bell.listen(now)
        bell = self._bell_state()  # before the ask: a ring during it is news for the next
        if ask is None:
            ask = self._due(now, bell)
            if ask and not self.shared and self._silence_only(bell):
                ask = await self._history_grew(now)
        if self.last_page is None and bell is not None and not from_history(bell) and not self.shared:
            await self._history_grew(now)  # where the first silence is measured from
        out = await self._new_log_events(bell) if ask or self.last_page is None else []
        live: list[dict[str, Any]] = []
        if self.assistant:
            live.extend(self.assistant.drain())
        for stream in self.tools.values():
            live.extend(stream.drain())
        self._live_moved = bool(live)
        out.extend(live)
        out.extend(await self._poll_children())
        if self.tag is not None:
            for event in out:
                event["subagent"] = self.tag
        return out

    async def _new_log_events(self, bell: BellState) -> list[dict[str, Any]]:
        self._asked_at = asyncio.get_running_loop().time()
        woken, self._woken = self._woken, False
        page = await self._next_page(bell, woken)
        self.last_page = page
        self._log_moved = bool(page.events)
        if page.events or page.is_streaming:
            self._idle_wait, self._news_at = 0.0, self._asked_at
        elif self._asked_at - self._news_at >= IDLE_GRACE_S:
            self._idle_wait = min(max(2 * self._idle_wait, POLL_INTERVAL_S), IDLE_ASK_MAX_S)
        out: list[dict[str, Any]] = []
        first = page.next_offset - len(page.events)
        for i, event in enumerate(page.events):
            kind = event["type"]
            if kind == "agent_start":
                self.run_start, self.run_messages = first + i, []
            elif kind == "message_end":
                self.run_messages.append(event["message"])
            elif kind == "agent_end" and "_messagesFrom" in event:
                start = event.pop("_messagesFrom")
                if start == self.run_start:
                    event["messages"] = self.run_messages
                else:
                    event["messages"] = await self._run_messages_since(start, first + i)
            out.extend(self._translate(event))
        self.offset = page.next_offset
        return out

    def _fed_page(self, bell: BellState) -> EventsPage | None:
        """What the doorbell's rings since the last look say, when they cover this follower's
        offset; None: the workflow is asked."""
        if self._feed is None or bell is None or from_history(bell) or bell == self._bell_asked:
            return None
        self._feed.read_new()
        fed = self._feed.page_from(self.offset)
        if fed is None:
            return None
        self._bell_asked = bell
        return EventsPage(
            base_offset=self.offset, next_offset=fed.next_offset, events=fed.events, is_streaming=fed.busy
        )

    async def _next_page(self, bell: BellState, woken: bool) -> EventsPage:
        fed = self._fed_page(bell)
        if fed is not None:
            return fed
        if self.shared:
            if self._shared_log is None:
                assert self.session_path is not None
                chain = await chain_id(self.handle.describe)
                self._shared_log = SharedEventLog(
                    shared_events_dir(self.session_path, self.session_id), chain
                )
            try:
                page = await self._shared_log.page(
                    self.offset, self._read_events, bell, urgent=woken, look=self._look
                )
            except OSError:
                # No sidecar can be made or read here (a session a team's cluster runs, whose
                # folder is the worker's, not this machine's; a read-only or full disk):
                # watching goes on with asks of its own.
                self.shared = False
            else:
                # Up to date as of the last ask anyone made: an older bell than this one
                # means this follower looks again at its next poll.
                self._bell_asked = self._shared_log.asked_bell
                return page
        self._bell_asked = bell
        return await self._read_events(self.offset)

    def _adopt_children(self, event: dict[str, Any]) -> None:
        details = (event.get("partialResult") or {}).get("details") or {}
        for child in details.get("children") or []:
            if self.client is None or child["sessionId"] in self.adopted:
                continue
            self.adopted.add(child["sessionId"])
            self.children[child["sessionId"]] = EventFollower(
                self.client.get_workflow_handle_for(
                    AgentSessionWorkflow.run, workflow_id_for(child["sessionId"])
                ),
                child.get("sessionFile"),
                child["sessionId"],
                live=self.live,
                client=self.client,
                parent_waker=self._waker,
                tag={
                    "sessionId": child["sessionId"],
                    "agent": child.get("agent", ""),
                    "toolCallId": event["toolCallId"],
                },
            )

    async def _poll_children(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for child_id, child in list(self.children.items()):
            try:
                out.extend(await child.poll())
            except RPCError:
                continue  # not started yet, or its worker is busy: next time
            page = child.last_page
            if page is not None and not page.is_streaming and any(e["type"] == "agent_end" for e in out):
                del self.children[child_id]
        return out

    async def skip_to_end(self) -> None:
        """Start from what happens next: a page far past the end says where the end is."""
        page = await self._read_events(1 << 62)
        self.offset = page.next_offset

    async def events(self, *, until_idle: bool) -> AsyncIterator[dict[str, Any]]:
        """Yield events; with `until_idle`, stop once a run has ended and nothing else is queued."""
        seen_end = False
        while True:
            batch = await self.poll()
            for event in batch:
                if event["type"] == "agent_end" and "subagent" not in event:
                    seen_end = True
                yield event
            page = self.last_page
            if until_idle and seen_end and page is not None and not page.is_streaming and not batch:
                return
            if not batch:
                await self.wait_for_news()
