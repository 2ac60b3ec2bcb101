"""One query stream per session for all the watchers on this machine.

A watcher learns of new log events by a query the session's worker answers, so N watchers
each asking on their own cost the worker N queries a poll. Shared followers take turns
instead: on a poll, whoever takes `<chain>.lock` (flock, never waited for) asks, unless
someone asked less than SHARED_ASK_EVERY_S ago (the lock file's mtime), or the workflow's
bell (its doorbell, store/doorbell.py, or its history, history_bell.py) has not rung since the
last ask (the lock file holds its state then) and that ask is younger than the bell's quiet
interval, or, with no bell, the last ask is under a second old (IDLE_ASK_MAX_S) and the
session was idle; a follower whose own client just sent something asks all the same. Past
a doorbell's quiet interval, the workflow's history length is looked at first
(history_mark.py; the lock file keeps the last look's too), and the log is asked only when
it grew; the look dates the lock file as an ask would. The asker appends the new raw events
with their global offsets to `<chain>.jsonl`; every follower reads its events from that
file. The lock is held for one ask only, so a watcher that exits, is killed or stops polling
leaves nobody waiting on it.

Lines are `{"o": offset, "e": event}` for each event of a page, then `{"n": next_offset,
"s": is_streaming}`. A page's lines go out in one write (all or nothing, even if the
writer is killed), and a reader hands out events only once the state line after them is
in, so the streaming flag it reports always fits them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.service import RPCError

from tempi.client.history_bell import from_history, quiet_ask_s
from tempi.client.history_mark import HistoryMark
from tempi.store.doorbell import BellState
from tempi.store.doorbell_feed import ring_lines
from tempi.store.modes import create_private_file, make_private_dirs
from tempi.workflows.session_types import EventsPage

# One ask per poll interval for all the watchers of a session, as one watcher idling asks.
SHARED_ASK_EVERY_S = 0.05
# Without a doorbell, an idle session's log (no run going, nothing new at the last asks) is
# asked less and less often, down to this: a prompt sent from another client shows within
# it. One sent through the follower's own SessionClient wakes it at once.
IDLE_ASK_MAX_S = 1.0

Query = Callable[[int], Awaitable[EventsPage]]
Look = Callable[[], Awaitable[HistoryMark]]


class SharedEventLog:
    """One follower's view of a session chain's shared event file."""

    def __init__(self, directory: Path, chain_id: str) -> None:
        self.directory = directory
        self.path = directory / f"{chain_id}.jsonl"
        self.lock_path = directory / f"{chain_id}.lock"
        self._pos = 0
        self._partial = b""
        self._staged: list[tuple[int, dict[str, Any]]] = []
        self._ready: deque[tuple[int, dict[str, Any]]] = deque()
        self.end: int | None = None  # next_offset of the last page written
        self.is_streaming = True
        self.asked_bell: BellState = None  # the doorbell as it was at the last ask written here

    async def page(
        self,
        offset: int,
        query: Query,
        bell: BellState = None,
        *,
        urgent: bool = False,
        look: Look | None = None,
    ) -> EventsPage:
        """The events from `offset` on that the file holds (asking for everyone first when
        it is this follower's turn); a stretch the file lacks is asked for directly. `bell`:
        the workflow's doorbell as it is now, None without one; `urgent`: this follower's
        client just sent the session something; `look`: the workflow's history mark, looked
        at instead of asking while a doorbell stays silent (history_mark.py)."""
        await self._ask_if_due(offset, query, bell, urgent, look)
        self._read_new()
        while self._ready and self._ready[0][0] < offset:
            self._ready.popleft()
        if self.end is None:
            # Nobody has written yet (another follower is asking right now): nothing to say.
            return EventsPage(base_offset=offset, next_offset=offset, events=[], is_streaming=True)
        if (self._ready and self._ready[0][0] != offset) or (not self._ready and self.end > offset):
            return await query(offset)  # joined behind the file's start, or a gap: asked alone
        events: list[dict[str, Any]] = []
        while self._ready and self._ready[0][0] == offset + len(events):
            events.append(self._ready.popleft()[1])
        return EventsPage(
            base_offset=offset,
            next_offset=offset + len(events),
            events=events,
            is_streaming=self.is_streaming,
        )

    async def _ask_if_due(
        self, offset: int, query: Query, bell: BellState, urgent: bool, look: Look | None
    ) -> None:
        make_private_dirs(self.directory)
        fd = create_private_file(self.lock_path, os.O_RDWR)
        try:
            self.asked_bell = _stored(fd)[0]
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another follower is asking: its answer lands in the file
            self._read_new()  # the file is this follower's now: what it holds is all there is
            self.asked_bell, mark = _stored(fd)
            silence_only = False
            if self.end is not None:
                if not self._due(time.time() - os.fstat(fd).st_mtime, bell, urgent):
                    return
                silence_only = not urgent and bell == self.asked_bell
            if look is not None and _doorbell(bell) and (silence_only or mark is None):
                with contextlib.suppress(RPCError):  # the ask says what is wrong
                    now = await look()
                    if silence_only and now == mark:
                        _store(fd, self.asked_bell, mark)  # dates the look as an ask
                        return
                    mark = now  # where the next silence is measured from
            # Never an offset twice: from the file's end, or later if this follower is ahead.
            page = await query(max(offset, self.end or 0))
            self._append(page)
            # The bell as it was before this ask (a ring during it calls for the next one).
            _store(fd, bell, mark)
            self.asked_bell = bell
        finally:
            os.close(fd)  # releases the lock

    def _due(self, age: float, bell: BellState, urgent: bool) -> bool:
        """Whether the shared ask, last made `age` seconds ago, is made again now (what this
        follower's client just sent came after that ask, however recent)."""
        if urgent:
            return True
        if age < SHARED_ASK_EVERY_S:
            return False
        if bell is not None:
            return bell != self.asked_bell or age >= quiet_ask_s(bell)
        return self.is_streaming or age >= IDLE_ASK_MAX_S

    def _append(self, page: EventsPage) -> None:
        if not page.events and page.next_offset == self.end and page.is_streaming == self.is_streaming:
            return
        first = page.next_offset - len(page.events)
        # The doorbell's shape, without the leaf, which a query's page does not say.
        lines = ring_lines(page.next_offset, page.is_streaming, first=first, events=page.events)
        fd = create_private_file(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, lines)
        finally:
            os.close(fd)

    def _read_new(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._pos)
                chunk = fh.read()
        except FileNotFoundError:
            return
        self._pos += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            item = json.loads(line)
            if "o" in item:
                self._staged.append((item["o"], item["e"]))
            else:
                self._ready.extend(self._staged)
                self._staged = []
                self.end, self.is_streaming = item["n"], item["s"]


def _doorbell(bell: BellState) -> bool:
    return bell is not None and not from_history(bell)


def _ints(value: object, *lengths: int) -> tuple[int, ...] | None:
    if isinstance(value, list) and len(value) in lengths and all(isinstance(n, int) for n in value):
        return tuple(value)
    return None


def _stored(fd: int) -> tuple[BellState, HistoryMark | None]:
    """The bell's state the last ask wrote into the lock file, and the workflow's history
    mark at the last look (None: none written)."""
    try:
        stored = json.loads(os.pread(fd, 256, 0) or b"null")
    except ValueError:
        return None, None
    if not isinstance(stored, dict):
        return None, None
    mark = _ints(stored.get("mark"), 2)
    return _ints(stored.get("bell"), 2, 3), (mark[0], mark[1]) if mark else None


def _store(fd: int, bell: BellState, mark: HistoryMark | None) -> None:
    """Writing it also dates the ask (the file's mtime)."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"bell": bell, "mark": mark}).encode(), 0)
    os.utime(fd)


async def chain_id(describe: Callable[[], Awaitable[Any]]) -> str:
    """The id of the first run of the session's workflow chain, the same across continue-as-new."""
    description = await describe()
    info = description.raw_description.workflow_execution_info
    return str(info.first_run_id or info.execution.run_id)
