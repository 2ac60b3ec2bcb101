"""Session file lines: every line pi wrote reads back and writes out unchanged."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from tempi.agent.session_entries import (
    CompactionEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    UnknownEntry,
    epoch_ms,
    iso_timestamp,
    parse_entry,
    sequential_entry_id,
    session_entry_adapter,
)
from tests.fixture_paths import PI_FIXTURES

FIXTURE_SESSIONS = sorted((PI_FIXTURES / "sessions").glob("*.jsonl"))


def fixture_lines() -> list[tuple[str, str]]:
    return [
        (f"{path.name}:{number}", line)
        for path in FIXTURE_SESSIONS
        for number, line in enumerate(path.read_text().split("\n"), start=1)
        if line
    ]


def test_fixtures_are_present() -> None:
    # pi's own recordings; more are added as providers are recorded.
    recorded = {"basic-anthropic", "basic-openai", "overflow", "rpc-steer-followup-compact", "tools"}
    assert recorded <= {path.stem for path in FIXTURE_SESSIONS}


@pytest.mark.parametrize(("where", "line"), fixture_lines())
def test_every_fixture_line_round_trips(where: str, line: str) -> None:
    data = json.loads(line)
    if data["type"] == "session":
        model = SessionHeader.model_validate(data)
        assert model.to_json_dict() == data
        return
    entry = parse_entry(data)
    assert not isinstance(entry, UnknownEntry), where
    assert entry.to_json_dict() == data
    assert json.loads(entry.to_json()) == data
    # The union type used across process boundaries agrees.
    assert session_entry_adapter.validate_python(data).to_json_dict() == data


def test_root_entry_keeps_null_parent_id() -> None:
    entry = ModelChangeEntry(id="abcd1234", timestamp="2026-01-01T00:00:00.000Z", provider="p", model_id="m")
    line = entry.to_json()
    assert json.loads(line) == {
        "type": "model_change",
        "id": "abcd1234",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "provider": "p",
        "modelId": "m",
    }
    assert line.startswith('{"type":"model_change","id":"abcd1234","parentId":null,')


def test_unknown_types_and_unexpected_shapes_are_kept_verbatim() -> None:
    future = {"type": "bookmark_v9", "id": "1", "parentId": None, "timestamp": "t", "extra": [1, None]}
    entry = parse_entry(future)
    assert isinstance(entry, UnknownEntry)
    assert entry.to_json_dict() == future

    odd_message = {
        "type": "message",
        "id": "2",
        "parentId": "1",
        "timestamp": "t",
        "message": {"role": "robot"},
    }
    entry = parse_entry(odd_message)
    assert isinstance(entry, UnknownEntry)
    assert entry.to_json_dict() == odd_message


def test_entries_without_id_are_rejected() -> None:
    with pytest.raises(ValidationError):
        parse_entry({"type": "message", "message": {"role": "user", "content": "x", "timestamp": 1}})


def test_typed_entries_expose_pi_fields() -> None:
    entry = parse_entry(
        {
            "type": "compaction",
            "id": "c1",
            "parentId": "p",
            "timestamp": "2026-11-21T04:51:51.008Z",
            "summary": "s",
            "firstKeptEntryId": "k",
            "tokensBefore": 5,
            "fromHook": False,
        }
    )
    assert isinstance(entry, CompactionEntry)
    assert (entry.first_kept_entry_id, entry.tokens_before, entry.from_hook) == ("k", 5, False)
    info = parse_entry({"type": "session_info", "id": "i", "parentId": "c1", "timestamp": "t", "name": "n"})
    assert isinstance(info, SessionInfoEntry) and info.name == "n"
    message = parse_entry(
        {"type": "message", "id": "m", "parentId": None, "timestamp": "t",
         "message": {"role": "user", "content": "hi", "timestamp": 1}}
    )  # fmt: skip
    assert isinstance(message, MessageEntry) and message.message.role == "user"


def test_a_sessions_entry_ids_look_like_pis_and_never_repeat() -> None:
    ids = [sequential_entry_id(0xDEADBEEF, n) for n in range(200_000)]
    assert all(len(i) == 8 and int(i, 16) >= 0 for i in ids)
    assert len(set(ids)) == len(ids)
    # Random 32-bit ids would repeat within 200,000 entries almost surely (p > 0.99).
    assert sequential_entry_id(0xDEADBEEF, 5) == ids[5]  # deterministic for replay
    assert sequential_entry_id(1, 0) != sequential_entry_id(2, 0)


def test_timestamps_in_pi_format() -> None:
    assert iso_timestamp(1795236710903) == "2026-11-21T04:51:50.903Z"
    assert epoch_ms("2026-11-21T04:51:50.903Z") == 1795236710903
    assert iso_timestamp(epoch_ms("2026-01-02T03:04:05.006Z")) == "2026-01-02T03:04:05.006Z"
