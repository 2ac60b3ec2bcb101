"""The lines of a session file (pi's format, version 3).

Line 1 is a `SessionHeader`; every other line is an entry with `id` / `parentId`, and
the entries form a tree. Unknown fields are kept, and an entry tempi cannot read
(a type from a newer pi, or a shape it does not expect) is kept as an `UnknownEntry`
so the tree stays whole and the line is written back unchanged.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Tag, TypeAdapter, ValidationError

from tempi.agent.base import PiModel
from tempi.agent.messages import AgentMessage, UserBlock
from tempi.agent.model_spec import ThinkingLevel

CURRENT_SESSION_VERSION = 3


class SessionHeader(PiModel):
    type: Literal["session"] = "session"
    version: int = CURRENT_SESSION_VERSION
    id: str
    timestamp: str
    cwd: str = ""
    parent_session: str | None = None


class EntryBase(PiModel):
    type: str
    id: str
    parent_id: str | None = None
    timestamp: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        # A root entry's parentId is written as null, never left out.
        data = super().to_json_dict()
        if "parentId" in data:
            return data
        ordered: dict[str, Any] = {}
        for key, value in data.items():
            ordered[key] = value
            if key == "id":
                ordered["parentId"] = None
        return ordered

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict(), ensure_ascii=False, separators=(",", ":"))


class MessageEntry(EntryBase):
    type: Literal["message"] = "message"
    message: AgentMessage


class ModelChangeEntry(EntryBase):
    type: Literal["model_change"] = "model_change"
    provider: str
    model_id: str


class ThinkingLevelChangeEntry(EntryBase):
    type: Literal["thinking_level_change"] = "thinking_level_change"
    thinking_level: ThinkingLevel


class CompactionEntry(EntryBase):
    type: Literal["compaction"] = "compaction"
    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: Any = None
    # True when an extension wrote the summary (pi's legacy name).
    from_hook: bool | None = None


class BranchSummaryEntry(EntryBase):
    type: Literal["branch_summary"] = "branch_summary"
    from_id: str
    summary: str
    details: Any = None
    from_hook: bool | None = None


class CustomEntry(EntryBase):
    """Extension state; never part of the model's context."""

    type: Literal["custom"] = "custom"
    custom_type: str
    data: Any = None


class CustomMessageEntry(EntryBase):
    """An extension's message; reaches the model as a user message."""

    type: Literal["custom_message"] = "custom_message"
    custom_type: str
    content: str | list[UserBlock]
    details: Any = None
    display: bool = True


class LabelEntry(EntryBase):
    """A bookmark on another entry; an absent label clears it."""

    type: Literal["label"] = "label"
    target_id: str
    label: str | None = None


class SessionInfoEntry(EntryBase):
    type: Literal["session_info"] = "session_info"
    name: str | None = None


class UnknownEntry(EntryBase):
    """An entry kept as read: all its fields survive in the model's extras."""


_ENTRY_CLASSES: dict[str, type[EntryBase]] = {
    "message": MessageEntry,
    "model_change": ModelChangeEntry,
    "thinking_level_change": ThinkingLevelChangeEntry,
    "compaction": CompactionEntry,
    "branch_summary": BranchSummaryEntry,
    "custom": CustomEntry,
    "custom_message": CustomMessageEntry,
    "label": LabelEntry,
    "session_info": SessionInfoEntry,
}


def _entry_tag(value: Any) -> str:
    if isinstance(value, UnknownEntry):
        return "unknown"
    entry_type = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return entry_type if entry_type in _ENTRY_CLASSES else "unknown"


SessionEntry = Annotated[
    Annotated[MessageEntry, Tag("message")]
    | Annotated[ModelChangeEntry, Tag("model_change")]
    | Annotated[ThinkingLevelChangeEntry, Tag("thinking_level_change")]
    | Annotated[CompactionEntry, Tag("compaction")]
    | Annotated[BranchSummaryEntry, Tag("branch_summary")]
    | Annotated[CustomEntry, Tag("custom")]
    | Annotated[CustomMessageEntry, Tag("custom_message")]
    | Annotated[LabelEntry, Tag("label")]
    | Annotated[SessionInfoEntry, Tag("session_info")]
    | Annotated[UnknownEntry, Tag("unknown")],
    Discriminator(_entry_tag),
]
"""Any entry line; a type tempi does not know becomes an UnknownEntry."""

session_entry_adapter: TypeAdapter[SessionEntry] = TypeAdapter(SessionEntry)


def parse_entry(data: dict[str, Any]) -> SessionEntry:
    """A typed entry; one whose fields do not fit its type is kept as an UnknownEntry.

    Raises ValidationError only when `type` or `id` is missing or not a string.
    """
    entry_class = _ENTRY_CLASSES.get(data.get("type"))  # type: ignore[arg-type]
    if entry_class is not None:
        try:
            return entry_class.model_validate(data)  # type: ignore[return-value]
        except ValidationError:
            pass
    return UnknownEntry.model_validate(data)


# An odd step makes n -> seed + n * step a permutation of the 32-bit ids.
ENTRY_ID_STEP = 0x9E3779B1


def sequential_entry_id(seed: int, n: int) -> str:
    """The n-th entry id of a session: 8 hex characters, like pi's, that look random but
    never repeat within a session for 2**32 entries, however many runs it spans."""
    return f"{(seed + n * ENTRY_ID_STEP) % 2**32:08x}"


def iso_timestamp(epoch_ms: int) -> str:
    """pi's timestamp format: UTC, millisecond precision, `Z` suffix."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def epoch_ms(timestamp: str) -> int:
    """Milliseconds since the epoch for an ISO timestamp (naive ones are taken as UTC)."""
    moment = datetime.fromisoformat(timestamp)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)
