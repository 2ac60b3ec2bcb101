"""mom's event files as the bot reads them: its cron dialect, its prefix, and what a bad
file is told."""

from __future__ import annotations

import json

import pytest

from tempi.slack.event_files import (
    BadEventFile,
    OneShotEvent,
    PeriodicEvent,
    event_detail,
    event_prompt,
    parse_event_file,
)


def test_croner_seconds_first_cron_becomes_temporals_seven_fields() -> None:
    every_5s = parse_event_file(
        json.dumps({"type": "periodic", "channelId": "C1", "text": "t", "schedule": "*/5 * * * * *"}).encode()
    )
    assert isinstance(every_5s, PeriodicEvent)
    # Temporal would read six fields as minute..year: every 5 minutes, not every 5 seconds.
    assert every_5s.temporal_cron() == "*/5 * * * * * *"
    daily = parse_event_file(
        json.dumps(
            {
                "type": "periodic",
                "channelId": "C1",
                "text": "t",
                "schedule": "0 9 * * 1-5",
                "timezone": "Europe/Vienna",
            }
        ).encode()
    )
    assert isinstance(daily, PeriodicEvent) and daily.temporal_cron() == "0 9 * * 1-5"


def test_the_prompt_prefix_names_the_file_type_and_time() -> None:
    raw = {"type": "one-shot", "channelId": "C1", "text": "standup", "at": "2026-12-01T09:00:00+01:00"}
    event = parse_event_file(json.dumps(raw).encode())
    assert isinstance(event, OneShotEvent)
    assert event.when().utcoffset() is not None
    detail = event_detail(event)
    assert event_prompt("s.json", event.type, detail, event.text) == (
        "[EVENT:s.json:one-shot:2026-12-01T09:00:00+01:00] standup"
    )


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b'{"type": "one-shot", "channelId": "C1", "text": "x", "at": "tomorrow"}',
        b'{"type": "weekly", "channelId": "C1", "text": "x"}',
        b'{"type": "immediate", "text": "no channel"}',
    ],
)
def test_a_bad_event_file_is_refused_with_the_format_to_use(raw: bytes) -> None:
    with pytest.raises(BadEventFile, match="channelId, text and type immediate"):
        parse_event_file(raw)
