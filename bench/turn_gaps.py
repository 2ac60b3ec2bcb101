"""Per-turn overhead as the model server sees it: from the end of one answer to the arrival of
the next request of the same conversation. Everything an agent does between two model calls
falls in that gap (its workflow tasks, the tool call, its store, its events) and nothing of
the model's own time does, so agents built on different stacks compare on one clock."""

from __future__ import annotations

import itertools
from pathlib import Path

from tempi.testing.scripted_llm.recording import RecordedRequest


def load_records(path: Path) -> list[RecordedRequest]:
    """A scripted server's `--record` file."""
    if not path.exists():
        return []
    return [
        RecordedRequest.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()
    ]


def conversation(
    records: list[RecordedRequest], scenario: str, route: str | None = None
) -> list[RecordedRequest]:
    """The model calls one conversation made, in arrival order: the answered turns of one
    scenario (and of one of its routes), retried failures and summaries left out."""
    calls = [
        r
        for r in records
        if r.scenario == scenario and r.route == route and r.kind == "turn" and r.status == 200
    ]
    return sorted(calls, key=lambda r: r.received_at)


def turn_gaps(calls: list[RecordedRequest]) -> list[float]:
    """Seconds from each answer's end to the next request's arrival."""
    gaps = []
    for answered, following in itertools.pairwise(calls):
        if answered.answered_at is None:
            raise ValueError(f"the answer to {answered.path} (turn {answered.turn_index}) never ended")
        gaps.append(following.received_at - answered.answered_at)
    return gaps
