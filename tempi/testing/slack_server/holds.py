"""Requests held in flight on demand: "the next call of method M that matches stays unanswered
until the test lets it go", so a test can kill the caller while Slack has (or has not yet)
acted on it, the window in which a retry may post twice."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Match = Callable[[dict[str, Any]], bool]


@dataclass
class Hold:
    """One held request. `applied`: Slack acted on it before the answer was lost (a message
    posted whose `ts` never reached the caller); otherwise the request is dropped unapplied."""

    method: str
    match: Match
    applied: bool
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    args: dict[str, Any] = field(default_factory=dict)

    def release(self) -> None:
        self.released.set()


class Holds:
    def __init__(self) -> None:
        self._waiting: list[Hold] = []
        self._all: list[Hold] = []

    def add(self, method: str, match: Match, applied: bool) -> Hold:
        hold = Hold(method, match, applied)
        self._waiting.append(hold)
        self._all.append(hold)
        return hold

    def take(self, method: str, args: dict[str, Any]) -> Hold | None:
        """The hold this call falls into, if any (each hold takes one call)."""
        for hold in self._waiting:
            if hold.method == method and hold.match(args):
                self._waiting.remove(hold)
                hold.args = dict(args)
                hold.reached.set()
                return hold
        return None

    def release_all(self) -> None:
        for hold in self._all:
            hold.release()
