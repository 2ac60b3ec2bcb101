"""What a doorbell's rings say (store/doorbell.py), so that a watcher on the worker's machine
reads a session's new events from the doorbell instead of asking the workflow for them.

Each ring is one write of whole lines: the new log events with their global offsets,
`{"o": offset, "e": event}`, then the log's state, `{"n": next_offset, "s": busy, "l": leaf}`
(the session's leaf, which a move in its tree changes without an event). The
events are there only while a watcher listens (it keeps `<bell>.watch` fresh): with nobody
watching, a ring is the state line alone, and a worker spends nothing on serializing events.
A reader keeps the events since its last look only while they join up with the state line
after them; a gap (it started listening late, an event could not be written, the file was
replaced) leaves it asking the workflow, as without a doorbell.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

# A reader opening a doorbell for the first time starts this far from its end: older rings
# carry events it will have asked the workflow for anyway.
FIRST_LOOK_BYTES = 256 * 1024
# No leaf is an entry id; a worker of an older tempi rings without one.
UNKNOWN_LEAF = "?"


class FeedPage(NamedTuple):
    events: list[dict[str, Any]]
    next_offset: int
    busy: bool


def ring_lines(
    end: int,
    busy: bool,
    leaf: str | None = UNKNOWN_LEAF,
    *,
    first: int | None = None,
    events: list[dict[str, Any]] | None = None,
) -> bytes:
    """One ring: the events from offset `first` (when given) and the state after them, with
    the session's `leaf` unless it is not known. Events that cannot be written as JSON are
    left out, so readers see a gap and ask."""
    lines: list[str] = []
    if first is not None and events:
        try:
            lines = [
                json.dumps({"o": first + i, "e": event}, ensure_ascii=False, separators=(",", ":"))
                for i, event in enumerate(events)
            ]
        except (TypeError, ValueError):
            lines = []
    state: dict[str, Any] = {"n": end, "s": busy}
    if leaf != UNKNOWN_LEAF:
        state["l"] = leaf
    lines.append(json.dumps(state, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode()


class BellFeed:
    """One watcher's reading of a doorbell's rings."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._inode: int | None = None
        self._pos = 0
        self._partial = b""
        self._staged: list[tuple[int, dict[str, Any]]] = []
        # Events known to run without a gap from `first` to `end`; `end` None: unknown.
        self.first = 0
        self.events: list[dict[str, Any]] = []
        self.end: int | None = None
        self.busy = True
        # The session's leaf as the last ring said; UNKNOWN_LEAF before one said it.
        self.leaf: str | None = UNKNOWN_LEAF
        # Rings read that said the leaf moved while the log did not: moves in the tree.
        self.tree_moves = 0

    def read_new(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                info = os.fstat(fh.fileno())
                if info.st_ino != self._inode or info.st_size < self._pos:
                    # A new file: what was half read of the old one is gone. At the first
                    # look, only the newest rings matter, from the first whole line on.
                    skip = self._inode is None and info.st_size > FIRST_LOOK_BYTES
                    if self._inode is not None:
                        # Rings may have gone with the old file.
                        self.end, self.leaf = None, UNKNOWN_LEAF
                    self._inode, self._partial, self._staged = info.st_ino, b"", []
                    self._pos = info.st_size - FIRST_LOOK_BYTES if skip else 0
                    if skip:
                        fh.seek(self._pos)
                        self._pos += len(fh.readline())
                fh.seek(self._pos)
                chunk = fh.read()
        except OSError:
            return
        self._pos += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            self._take(line)

    def _take(self, line: bytes) -> None:
        try:
            item = json.loads(line)
            if "o" in item:
                self._staged.append((int(item["o"]), item["e"]))
                return
            end, busy = int(item["n"]), bool(item["s"])
            leaf = item.get("l", UNKNOWN_LEAF)
            if leaf is not None and not isinstance(leaf, str):
                raise TypeError(leaf)
        except (ValueError, TypeError, KeyError):
            # Not a line of this format: nothing is known until the next ring.
            self.end, self.leaf, self._staged = None, UNKNOWN_LEAF, []
            return
        staged, self._staged = self._staged, []
        if staged and staged[0][0] != self.first + len(self.events):
            self.first, self.events = staged[0][0], []
        self.events.extend(event for _, event in staged)
        if self.first + len(self.events) != end:
            self.first, self.events = end, []  # a gap: only the state is known
        if end == self.end and self.leaf not in (leaf, UNKNOWN_LEAF):
            self.tree_moves += 1
        self.end, self.busy, self.leaf = end, busy, leaf

    def page_from(self, offset: int) -> FeedPage | None:
        """The events from `offset` to the last ring's end, or None when the rings do not
        cover that stretch."""
        if self.end is None or not self.first <= offset <= self.end:
            return None
        events = self.events[offset - self.first :]
        del self.events[: offset - self.first]  # read once: a follower only moves forward
        self.first = offset
        return FeedPage(events, self.end, self.busy)
