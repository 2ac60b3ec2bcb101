"""What a closed conversation hands to its next run: the newest message its session has seen
(so the channel's log is not brought twice) and the messages it answered (so a late
redelivery starts nothing). Written when an idle conversation closes, read by whoever starts
the conversation again (the gateway, an event's delivery)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from tempi.workflows.slack_types import SlackConversationInput, SlackConversationState

log = logging.getLogger("tempi.slack")

IDLE_CLOSE_ENV = "TEMPI_SLACK_IDLE_CLOSE"
DEFAULT_IDLE_CLOSE_S = 3600


class SavedConversation(BaseModel):
    synced_ts: str = ""
    seen: list[str] = Field(default_factory=list)


def idle_close_seconds() -> float:
    raw = os.environ.get(IDLE_CLOSE_ENV, "").strip()
    try:
        return max(float(raw), 0.0) if raw else DEFAULT_IDLE_CLOSE_S
    except ValueError:
        log.warning("%s=%r is not a number of seconds; using %d", IDLE_CLOSE_ENV, raw, DEFAULT_IDLE_CLOSE_S)
        return DEFAULT_IDLE_CLOSE_S


def save(path: Path, saved: SavedConversation) -> None:
    # A conversation that only answered `stop` has no session folder yet.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(saved.model_dump_json())
    tmp.replace(path)


def with_saved_state(inp: SlackConversationInput) -> SlackConversationInput:
    """The conversation's input, carrying what it knew when it last closed (if it did)."""
    path = Path(inp.state_file())
    try:
        saved = SavedConversation.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return inp
    except (OSError, ValidationError, json.JSONDecodeError) as err:
        log.warning("ignoring %s: %s", path, err)
        return inp
    state = SlackConversationState(synced_ts=saved.synced_ts, seen=saved.seen)
    return inp.model_copy(update={"state": state})
