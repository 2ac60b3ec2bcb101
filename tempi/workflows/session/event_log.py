"""The session's event log: pi's events in order, with offsets that stay global across
continue-as-new, served page by page to watchers."""

from __future__ import annotations

import json
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from tempi.workflows.session_types import CarriedState, EventsPage

PAGE_BYTES = 1_000_000
CARRIED_EVENT_BYTES = 500_000  # continue-as-new input must stay well under 2 MB


def approx_size(event: dict[str, Any]) -> int:
    return len(json.dumps(event, separators=(",", ":"), default=str))


class EventLog:
    def __init__(self, state: CarriedState) -> None:
        self.state = state
        # The previous run's tail comes back as the start of this run's log.
        self.events: list[dict[str, Any]] = state.recent_events
        state.recent_events = []

    def emit(self, event: dict[str, Any]) -> int:
        """Append an event; returns its global offset."""
        offset = self.next_offset()
        self.events.append(event)
        return offset

    def next_offset(self) -> int:
        return self.state.event_offset + len(self.events)

    def since(self, from_offset: int) -> tuple[int, list[dict[str, Any]]]:
        """The events from `from_offset` (or the oldest held) on, and the offset of the first."""
        start = min(max(from_offset - self.state.event_offset, 0), len(self.events))
        return self.state.event_offset + start, self.events[start:]

    def carried(self) -> tuple[int, list[dict[str, Any]]]:
        """The next run's event offset and the newest events (up to CARRIED_EVENT_BYTES),
        so watchers a little behind miss nothing."""
        budget, start = CARRIED_EVENT_BYTES, len(self.events)
        while start > 0 and budget - approx_size(self.events[start - 1]) > 0:
            start -= 1
            budget -= approx_size(self.events[start])
        return self.state.event_offset + start, self.events[start:]

    def page(self, from_offset: int, *, is_streaming: bool) -> EventsPage:
        base = self.state.event_offset
        start = min(max(from_offset - base, 0), len(self.events))
        end, budget = start, PAGE_BYTES
        # Stay well inside gRPC's 4 MB message limit; always make progress by one event.
        while end < len(self.events) and (end == start or budget > 0):
            budget -= approx_size(self.events[end])
            if budget < 0 and end > start:
                break
            end += 1
        return EventsPage(
            base_offset=base, next_offset=base + end, events=self.events[start:end], is_streaming=is_streaming
        )
