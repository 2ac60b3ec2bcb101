"""The entry tree of a session and the conversation a leaf sees.

Entries link to their parent by id; the path from a leaf back to the root is one branch
of the conversation. Context rules are pi's: walking root -> leaf, the latest
`model_change` (or assistant message) and `thinking_level_change` set the model and
level; the latest `compaction` replaces everything before its `firstKeptEntryId` with a
summary.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.messages import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
)
from tempi.agent.model_spec import ThinkingLevel
from tempi.agent.session_entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    epoch_ms,
)


class UnknownEntryError(KeyError):
    """An entry id that is not in the tree."""


class SessionContext(PiModel):
    """What the model is shown from one leaf, and the model settings in force there."""

    messages: list[AgentMessage] = Field(default_factory=list)
    provider: str | None = None
    model_id: str | None = None
    thinking_level: ThinkingLevel = "off"


def _entry_ms(entry: SessionEntry) -> int:
    try:
        return epoch_ms(entry.timestamp) if entry.timestamp else 0
    except ValueError:
        return 0


def _apply_settings(context: SessionContext, entry: SessionEntry) -> None:
    """The model and thinking level in force after `entry`."""
    if isinstance(entry, ThinkingLevelChangeEntry):
        context.thinking_level = entry.thinking_level
    elif isinstance(entry, ModelChangeEntry):
        context.provider, context.model_id = entry.provider, entry.model_id
    elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
        context.provider, context.model_id = entry.message.provider, entry.message.model


def entry_message(entry: SessionEntry) -> AgentMessage | None:
    """The conversation message an entry contributes (outside any compaction), if any."""
    if isinstance(entry, MessageEntry):
        return entry.message
    if isinstance(entry, CustomMessageEntry):
        return CustomMessage(
            custom_type=entry.custom_type,
            content=entry.content,
            display=entry.display,
            details=entry.details,
            timestamp=_entry_ms(entry),
        )
    if isinstance(entry, BranchSummaryEntry) and entry.summary:
        return BranchSummaryMessage(summary=entry.summary, from_id=entry.from_id, timestamp=_entry_ms(entry))
    return None


class SessionTree:
    """Entries in file order, indexed by id and by parent. Appending moves the leaf."""

    def __init__(self, entries: Iterable[SessionEntry] = ()) -> None:
        self.entries: list[SessionEntry] = []
        self._by_id: dict[str, SessionEntry] = {}
        self._children: dict[str | None, list[SessionEntry]] = {}
        self.leaf_id: str | None = None
        self._last_context: tuple[str, SessionContext] | None = None
        for entry in entries:
            self._add(entry)

    def _add(self, entry: SessionEntry) -> None:
        self.entries.append(entry)
        self._by_id[entry.id] = entry
        self._children.setdefault(entry.parent_id, []).append(entry)
        self.leaf_id = entry.id

    def add_loaded(self, entry: SessionEntry) -> None:
        """An entry read from the file after the others: a repeated id is the file's
        business (the last one wins, as on a load from the start)."""
        self._add(entry)

    def append(self, entry: SessionEntry) -> None:
        if entry.id in self._by_id:
            raise ValueError(f"entry {entry.id} is already in the session")
        self._add(entry)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._by_id

    def get(self, entry_id: str) -> SessionEntry | None:
        return self._by_id.get(entry_id)

    def children(self, parent_id: str | None) -> list[SessionEntry]:
        """Direct children in append order; `None` gives the roots."""
        return list(self._children.get(parent_id, ()))

    def path_to(self, leaf_id: str) -> list[SessionEntry]:
        """Entries from the root down to `leaf_id`, both included."""
        entry = self._by_id.get(leaf_id)
        if entry is None:
            raise UnknownEntryError(f"no entry {leaf_id} in this session")
        path: list[SessionEntry] = []
        seen: set[str] = set()
        # A parent missing from the file ends the walk, as does a cycle in a damaged file.
        while entry is not None and entry.id not in seen:
            seen.add(entry.id)
            path.append(entry)
            entry = self._by_id.get(entry.parent_id) if entry.parent_id else None
        path.reverse()
        return path

    def labels(self) -> dict[str, str]:
        """Current label of each labelled entry (a later label entry replaces or clears)."""
        labels: dict[str, str] = {}
        for entry in self.entries:
            if isinstance(entry, LabelEntry):
                if entry.label:
                    labels[entry.target_id] = entry.label
                else:
                    labels.pop(entry.target_id, None)
        return labels

    def session_name(self) -> str | None:
        """The latest `session_info` name; an empty name clears it."""
        for entry in reversed(self.entries):
            if isinstance(entry, SessionInfoEntry):
                return (entry.name or "").strip() or None
        return None

    def build_context(self, leaf_id: str | None = None) -> SessionContext:
        """The context seen from `leaf_id` (default: the last appended entry)."""
        leaf = leaf_id if leaf_id is not None else self.leaf_id
        if leaf is None:
            return SessionContext()
        context = self._extend_last_context(leaf) or self._context_of(leaf)
        self._last_context = (leaf, context)
        # Callers get their own list: the one kept here is extended by the next turn.
        return context.model_copy(update={"messages": list(context.messages)})

    def _extend_last_context(self, leaf: str) -> SessionContext | None:
        """The last built context carried on to `leaf`, when `leaf` descends from its leaf
        through entries that add messages or settings only: a running session's next turn
        then costs its new entries, not the whole branch."""
        if self._last_context is None:
            return None
        last_leaf, last = self._last_context
        added: list[SessionEntry] = []
        entry = self._by_id.get(leaf)
        while entry is not None and entry.id != last_leaf:
            if isinstance(entry, CompactionEntry) or len(added) > len(self.entries):
                return None  # a compaction rewrites the start; a damaged file may loop
            added.append(entry)
            entry = self._by_id.get(entry.parent_id) if entry.parent_id else None
        if entry is None:
            return None  # another branch
        context = last.model_copy(update={"messages": list(last.messages)})
        for entry in reversed(added):
            _apply_settings(context, entry)
            message = entry_message(entry)
            if message is not None:
                context.messages.append(message)
        return context

    def _context_of(self, leaf: str) -> SessionContext:
        path = self.path_to(leaf)

        context = SessionContext()
        compaction_index: int | None = None
        for index, entry in enumerate(path):
            _apply_settings(context, entry)
            if isinstance(entry, CompactionEntry):
                compaction_index = index

        messages: list[AgentMessage] = []
        if compaction_index is None:
            kept: Iterable[SessionEntry] = path
        else:
            compaction = path[compaction_index]
            assert isinstance(compaction, CompactionEntry)
            messages.append(
                CompactionSummaryMessage(
                    summary=compaction.summary,
                    tokens_before=compaction.tokens_before,
                    timestamp=_entry_ms(compaction),
                )
            )
            before = path[:compaction_index]
            first_kept = next(
                (i for i, entry in enumerate(before) if entry.id == compaction.first_kept_entry_id),
                len(before),
            )
            kept = [*before[first_kept:], *path[compaction_index + 1 :]]
        for entry in kept:
            message = entry_message(entry)
            if message is not None:
                messages.append(message)
        context.messages = messages
        return context
