"""Planning a compaction: how big the context is, whether to compact, where to cut.

Pure code over the entries of one branch (root -> leaf). The summary itself is made by
an activity; this module decides what goes into it and what stays verbatim.

Token counts are estimates (characters / 4, an image as 1200 tokens) except where a
provider reported usage: the last successful assistant message's usage covers the whole
context up to it, so only what came after is estimated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Protocol

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.messages import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from tempi.agent.session_entries import (
    BranchSummaryEntry,
    CompactionEntry,
    MessageEntry,
    SessionEntry,
    epoch_ms,
)
from tempi.agent.session_tree import SessionTree, entry_message

CompactionReason = Literal["manual", "threshold", "overflow"]

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1200

READ_TOOLS = frozenset({"read"})
MODIFYING_TOOLS = frozenset({"write", "edit"})


class CompactionBudget(Protocol):
    """The `compaction` settings the planner reads (tempi.config's CompactionSettings fits)."""

    @property
    def enabled(self) -> bool: ...

    @property
    def reserve_tokens(self) -> int: ...

    @property
    def keep_recent_tokens(self) -> int: ...


class CompactionDetails(PiModel):
    """What a compaction entry's `details` holds: files seen in the summarized part."""

    read_files: list[str] = Field(default_factory=list)
    modified_files: list[str] = Field(default_factory=list)


class CompactionOutcome(PiModel):
    """A finished compaction, in the shape of pi's `compact` result."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: CompactionDetails = Field(default_factory=CompactionDetails)


class CompactionPlan(PiModel):
    """What to summarize and what to keep.

    On a split turn (the cut falls inside a turn) the turn's beginning is summarized on
    its own, and `messages_to_summarize` ends where that turn starts.
    """

    first_kept_entry_id: str
    messages_to_summarize: list[AgentMessage] = Field(default_factory=list)
    turn_prefix_messages: list[AgentMessage] = Field(default_factory=list)
    is_split_turn: bool = False
    previous_summary: str | None = None
    tokens_before: int
    read_files: list[str] = Field(default_factory=list)
    modified_files: list[str] = Field(default_factory=list)
    reserve_tokens: int


class BranchSummaryPlan(PiModel):
    """The part of a branch the user is leaving: entries after the common ancestor."""

    common_ancestor_id: str | None
    abandoned_entry_ids: list[str]
    messages: list[AgentMessage]
    read_files: list[str] = Field(default_factory=list)
    modified_files: list[str] = Field(default_factory=list)


# --- token estimates -------------------------------------------------------------------


def _block_chars(blocks: str | Sequence[Any]) -> int:
    if isinstance(blocks, str):
        return len(blocks)
    chars = 0
    for block in blocks:
        if isinstance(block, TextContent):
            chars += len(block.text)
        elif isinstance(block, ImageContent):
            chars += IMAGE_TOKENS * CHARS_PER_TOKEN
    return chars


def estimate_tokens(message: AgentMessage) -> int:
    """A deliberately generous guess at a message's size in tokens."""
    if isinstance(message, UserMessage | ToolResultMessage | CustomMessage):
        chars = _block_chars(message.content)
    elif isinstance(message, AssistantMessage):
        chars = 0
        for block in message.content:
            if isinstance(block, TextContent):
                chars += len(block.text)
            elif isinstance(block, ThinkingContent):
                chars += len(block.thinking)
            elif isinstance(block, ToolCall):
                chars += len(block.name) + len(json.dumps(block.arguments, ensure_ascii=False))
    elif isinstance(message, BashExecutionMessage):
        chars = len(message.command) + len(message.output)
    else:
        chars = len(message.summary)
    return math.ceil(chars / CHARS_PER_TOKEN)


def usage_tokens(usage: Usage) -> int:
    """The context size a provider reported for one call (prompt plus answer)."""
    return usage.total_tokens or usage.input + usage.output + usage.cache_read + usage.cache_write


def _reported_usage(message: AgentMessage) -> int | None:
    if not isinstance(message, AssistantMessage) or message.stop_reason in ("error", "aborted"):
        return None
    tokens = usage_tokens(message.usage)
    # A provider that reported nothing gives no anchor; estimating is better than zero.
    return tokens or None


def _latest_compaction(path: Sequence[SessionEntry]) -> int | None:
    for index in range(len(path) - 1, -1, -1):
        if isinstance(path[index], CompactionEntry):
            return index
    return None


def _first_kept_index(path: Sequence[SessionEntry], compaction_index: int) -> int:
    """Where the kept part before a compaction starts (nothing kept when its id is gone)."""
    compaction = path[compaction_index]
    assert isinstance(compaction, CompactionEntry)
    for index in range(compaction_index):
        if path[index].id == compaction.first_kept_entry_id:
            return index
    return compaction_index


def _entry_ms(entry: SessionEntry) -> int:
    try:
        return epoch_ms(entry.timestamp) if entry.timestamp else 0
    except ValueError:
        return 0


def _context_messages(path: Sequence[SessionEntry]) -> list[tuple[AgentMessage, bool]]:
    """The messages the model sees from this branch, each flagged True when it came
    after the latest compaction (only those carry usage that is still meaningful)."""
    compaction_index = _latest_compaction(path)
    if compaction_index is None:
        return [(m, True) for m in (entry_message(e) for e in path) if m is not None]
    compaction = path[compaction_index]
    assert isinstance(compaction, CompactionEntry)
    summary = CompactionSummaryMessage(
        summary=compaction.summary, tokens_before=compaction.tokens_before, timestamp=_entry_ms(compaction)
    )
    messages: list[tuple[AgentMessage, bool]] = [(summary, False)]
    for index in range(_first_kept_index(path, compaction_index), len(path)):
        message = entry_message(path[index])
        if message is not None:
            messages.append((message, index > compaction_index))
    return messages


def context_tokens(path: Sequence[SessionEntry]) -> int:
    """Tokens the next call from the end of `path` would send.

    The last successful assistant message after the latest compaction anchors the count
    with its reported usage; messages after it are estimated. Usage reported before that
    compaction measured a context that no longer exists, so it is never used.
    """
    messages = _context_messages(path)
    for index in range(len(messages) - 1, -1, -1):
        message, fresh = messages[index]
        reported = _reported_usage(message) if fresh else None
        if reported is not None:
            return reported + sum(estimate_tokens(m) for m, _ in messages[index + 1 :])
    return sum(estimate_tokens(m) for m, _ in messages)


def should_compact(tokens: int, context_window: int, settings: CompactionBudget) -> bool:
    """Whether the context has grown into the room kept free for the answer."""
    return settings.enabled and tokens > context_window - settings.reserve_tokens


# --- file operations -------------------------------------------------------------------


class FileOperations:
    """Files the agent read and changed, gathered from tool calls and earlier details."""

    def __init__(self) -> None:
        self.read: set[str] = set()
        self.modified: set[str] = set()

    def add_details(self, details: Any) -> None:
        """Carry the lists of an earlier compaction or branch summary forward."""
        if not isinstance(details, dict):
            return
        for key, target in (("readFiles", self.read), ("modifiedFiles", self.modified)):
            listed = details.get(key)
            if isinstance(listed, list):
                target.update(item for item in listed if isinstance(item, str))

    def add_message(self, message: AgentMessage) -> None:
        if not isinstance(message, AssistantMessage):
            return
        for call in message.tool_calls():
            path = call.arguments.get("path")
            if not isinstance(path, str) or not path:
                continue
            if call.name in READ_TOOLS:
                self.read.add(path)
            elif call.name in MODIFYING_TOOLS:
                self.modified.add(path)

    def add_messages(self, messages: Iterable[AgentMessage]) -> None:
        for message in messages:
            self.add_message(message)

    def read_only(self) -> list[str]:
        """Files read and never changed (a changed file is listed as modified only)."""
        return sorted(self.read - self.modified)

    def modified_files(self) -> list[str]:
        return sorted(self.modified)


# --- the cut ---------------------------------------------------------------------------


def _planning_message(entry: SessionEntry) -> AgentMessage | None:
    """What an entry contributes to the part being compacted (an older summary does not:
    it reaches the new summary as `previous_summary`)."""
    return None if isinstance(entry, CompactionEntry) else entry_message(entry)


def _is_cut_point(entry: SessionEntry) -> bool:
    # A tool result must stay with the call that asked for it, so it never starts the kept part.
    message = _planning_message(entry)
    return message is not None and not isinstance(message, ToolResultMessage)


def _starts_turn(entry: SessionEntry) -> bool:
    """Entries that reach the model as a user message open a turn."""
    message = _planning_message(entry)
    return message is not None and not isinstance(message, AssistantMessage | ToolResultMessage)


def _cut_index(path: Sequence[SessionEntry], start: int, cut_points: list[int], keep_tokens: int) -> int:
    """The newest valid cut point that keeps at least `keep_tokens` after it."""
    kept = 0
    for index in range(len(path) - 1, start - 1, -1):
        message = _planning_message(path[index])
        if message is None:
            continue
        kept += estimate_tokens(message)
        if kept >= keep_tokens:
            later = [point for point in cut_points if point >= index]
            if later:
                return later[0]
            # Only tool results from here on: keep them with the call that made them.
            return max(point for point in cut_points if point < index)
    return cut_points[0]


def _messages_between(path: Sequence[SessionEntry], start: int, end: int) -> list[AgentMessage]:
    return [m for m in (_planning_message(e) for e in path[start:end]) if m is not None]


def plan_compaction(path: Sequence[SessionEntry], settings: CompactionBudget) -> CompactionPlan | None:
    """Where to cut the branch ending at `path[-1]`, or None when there is nothing to
    compact: an empty branch, one that ends with a compaction, or one with no messages
    since the previous compaction's kept part began (only settings entries).

    The kept part starts at a user, assistant, shell-command or extension message,
    never at a tool result. Non-message entries just before the cut (model or thinking
    level changes, labels) are kept with it.
    """
    if not path or isinstance(path[-1], CompactionEntry):
        return None

    previous_index = _latest_compaction(path)
    previous: CompactionEntry | None = None
    start = 0
    if previous_index is not None:
        entry = path[previous_index]
        assert isinstance(entry, CompactionEntry)
        previous = entry
        start = _first_kept_index(path, previous_index)
        if start == previous_index:
            start = previous_index + 1

    cut_points = [index for index in range(start, len(path)) if _is_cut_point(path[index])]
    if not cut_points:
        return None
    cut = _cut_index(path, start, cut_points, settings.keep_recent_tokens)

    turn_start: int | None = None
    if not _starts_turn(path[cut]):
        turn_start = next((i for i in range(cut - 1, start - 1, -1) if _starts_turn(path[i])), None)

    first_kept = cut
    while (
        first_kept > start
        and entry_message(path[first_kept - 1]) is None
        and not isinstance(path[first_kept - 1], CompactionEntry)
    ):
        first_kept -= 1

    history_end = turn_start if turn_start is not None else first_kept
    to_summarize = _messages_between(path, start, history_end)
    turn_prefix = _messages_between(path, turn_start, first_kept) if turn_start is not None else []

    files = FileOperations()
    if previous is not None and not previous.from_hook:
        files.add_details(previous.details)
    files.add_messages(to_summarize)
    files.add_messages(turn_prefix)

    return CompactionPlan(
        first_kept_entry_id=path[first_kept].id,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=turn_prefix,
        is_split_turn=turn_start is not None,
        previous_summary=previous.summary if previous is not None else None,
        tokens_before=context_tokens(path),
        read_files=files.read_only(),
        modified_files=files.modified_files(),
        reserve_tokens=settings.reserve_tokens,
    )


# --- branch summaries ------------------------------------------------------------------


def _branch_message(entry: SessionEntry) -> AgentMessage | None:
    """What an abandoned entry tells its summary. Tool results are left out (the call says
    what was done); a compaction on the branch contributes its summary."""
    if isinstance(entry, CompactionEntry):
        return CompactionSummaryMessage(
            summary=entry.summary, tokens_before=entry.tokens_before, timestamp=_entry_ms(entry)
        )
    if isinstance(entry, MessageEntry) and isinstance(entry.message, ToolResultMessage):
        return None
    return entry_message(entry)


def plan_branch_summary(
    tree: SessionTree, old_leaf_id: str | None, target_id: str
) -> BranchSummaryPlan | None:
    """What moving from `old_leaf_id` to `target_id` leaves behind: the old branch's
    entries after the deepest entry both paths share. None when nothing with content is
    left behind (no old leaf, the target lies ahead on the same branch, or only settings
    entries are abandoned). Raises UnknownEntryError for an id not in the tree."""
    if old_leaf_id is None:
        return None
    old_path = tree.path_to(old_leaf_id)
    target_ids = {entry.id for entry in tree.path_to(target_id)}
    ancestor = next((i for i in range(len(old_path) - 1, -1, -1) if old_path[i].id in target_ids), None)
    abandoned = old_path[ancestor + 1 :] if ancestor is not None else old_path
    messages = [m for m in (_branch_message(e) for e in abandoned) if m is not None]
    if not messages:
        return None

    files = FileOperations()
    for entry in abandoned:
        if isinstance(entry, CompactionEntry | BranchSummaryEntry) and not entry.from_hook:
            files.add_details(entry.details)
    files.add_messages(messages)
    return BranchSummaryPlan(
        common_ancestor_id=old_path[ancestor].id if ancestor is not None else None,
        abandoned_entry_ids=[entry.id for entry in abandoned],
        messages=messages,
        read_files=files.read_only(),
        modified_files=files.modified_files(),
    )


def newest_within(messages: Sequence[AgentMessage], token_budget: int) -> list[AgentMessage]:
    """The newest messages whose estimated size fits `token_budget` (0: no limit)."""
    if token_budget <= 0:
        return list(messages)
    kept: list[AgentMessage] = []
    used = 0
    for message in reversed(messages):
        used += estimate_tokens(message)
        if used > token_budget:
            break
        kept.append(message)
    kept.reverse()
    return kept
