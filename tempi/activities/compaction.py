"""Summary calls: compacting a session and summarizing a branch the user left.

Plain async functions for the session activities to wrap. Writing is idempotent by
entry id: a compaction retried after its worker died finds the entry its first attempt
wrote and returns it without asking the model again.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

from tempi.activities.llm import StreamOptions, complete
from tempi.agent.compaction import (
    BranchSummaryPlan,
    CompactionBudget,
    CompactionDetails,
    CompactionOutcome,
    CompactionPlan,
    CompactionReason,
    newest_within,
    plan_branch_summary,
    plan_compaction,
)
from tempi.agent.compaction_prompts import (
    NO_EARLIER_HISTORY,
    branch_summary_request,
    file_lists,
    join_split_turn,
    summary_request,
    turn_prefix_request,
)
from tempi.agent.llm_context import LlmContext
from tempi.agent.messages import TextContent
from tempi.agent.model_spec import ModelSpec
from tempi.agent.session_entries import BranchSummaryEntry, CompactionEntry, SessionEntry
from tempi.agent.session_tree import SessionTree, UnknownEntryError
from tempi.store.session_store import SessionStore

# Output budgets as shares of `reserveTokens`: the main summary gets most of the room
# kept free for answers, the beginning of a split turn half of it.
SUMMARY_SHARE = 0.8
TURN_PREFIX_SHARE = 0.5
BRANCH_SUMMARY_MAX_TOKENS = 2048
DEFAULT_BRANCH_RESERVE_TOKENS = 16_384


class CompactionError(Exception):
    """A summary could not be made. `provider_message` is the provider's own words, when
    the model call is what failed."""

    def __init__(self, message: str, provider_message: str | None = None) -> None:
        super().__init__(message)
        self.provider_message = provider_message


class CompactionAborted(CompactionError):
    """The caller's abort signal stopped the summary call."""


class NothingToCompactError(CompactionError):
    """A manual compaction found nothing to summarize."""


class CompactionCancelled(CompactionError):
    """An extension's session_before_compact handler cancelled it."""


# Asked with the plan before the model is: None to summarize as usual, CANCEL to make no
# compaction, or the compaction to store instead (extensions' session_before_compact).
CANCEL: Literal["cancel"] = "cancel"
BeforeCompact = Callable[[CompactionPlan], Awaitable[CompactionOutcome | Literal["cancel"] | None]]


def _output_budget(model: ModelSpec, tokens: float) -> int:
    return max(1, min(math.floor(tokens), model.max_tokens))


async def _summary_text(
    model: ModelSpec,
    context: LlmContext,
    options: StreamOptions,
    max_tokens: int,
    what: str,
    abort: asyncio.Event | None,
) -> str:
    answer = await complete(model, context, options.model_copy(update={"max_tokens": max_tokens}), abort)
    if answer.stop_reason == "aborted":
        raise CompactionAborted(f"{what} was aborted")
    if answer.stop_reason == "error":
        reason = answer.error_message or "the provider gave no reason"
        raise CompactionError(f"{what} failed: {reason}", provider_message=answer.error_message)
    text = "\n".join(block.text for block in answer.content if isinstance(block, TextContent) and block.text)
    if not text.strip():
        # An empty summary would silently erase the history it replaces.
        raise CompactionError(f"{what} failed: the model returned no text")
    return text


async def summarize(
    plan: CompactionPlan,
    model: ModelSpec,
    options: StreamOptions,
    custom_instructions: str | None = None,
    abort: asyncio.Event | None = None,
) -> CompactionOutcome:
    """Ask the model for the summary the plan describes.

    A split turn is summarized in two calls made together: the history before the turn
    and the turn's beginning. Raises CompactionError (CompactionAborted on abort).
    """
    main_budget = _output_budget(model, SUMMARY_SHARE * plan.reserve_tokens)

    async def history() -> str:
        if plan.is_split_turn and not plan.messages_to_summarize:
            # Nothing new before the turn: the previous summary already says it all.
            return plan.previous_summary or NO_EARLIER_HISTORY
        request = summary_request(plan.messages_to_summarize, plan.previous_summary, custom_instructions)
        return await _summary_text(
            model, request, options, main_budget, "Summarizing the conversation", abort
        )

    if plan.is_split_turn and plan.turn_prefix_messages:
        prefix_request = turn_prefix_request(plan.turn_prefix_messages)
        prefix_budget = _output_budget(model, TURN_PREFIX_SHARE * plan.reserve_tokens)
        try:
            async with asyncio.TaskGroup() as group:
                history_task = group.create_task(history())
                prefix_task = group.create_task(
                    _summary_text(
                        model, prefix_request, options, prefix_budget, "Summarizing the current turn", abort
                    )
                )
        except ExceptionGroup as failures:
            # One call failed and the other was cancelled: report the failure itself.
            raise failures.exceptions[0] from None
        summary = join_split_turn(history_task.result(), prefix_task.result())
    else:
        summary = await history()

    return CompactionOutcome(
        summary=summary + file_lists(plan.read_files, plan.modified_files),
        first_kept_entry_id=plan.first_kept_entry_id,
        tokens_before=plan.tokens_before,
        details=CompactionDetails(read_files=plan.read_files, modified_files=plan.modified_files),
    )


def _stored_outcome(entry: SessionEntry) -> CompactionOutcome:
    if not isinstance(entry, CompactionEntry):
        raise CompactionError(
            f"entry {entry.id} already exists and is a {entry.type} entry, not a compaction"
        )
    details = entry.details if isinstance(entry.details, dict) else {}
    return CompactionOutcome(
        summary=entry.summary,
        first_kept_entry_id=entry.first_kept_entry_id,
        tokens_before=entry.tokens_before,
        details=CompactionDetails.model_validate(details),
    )


def _branch_path(tree: SessionTree, leaf_id: str) -> list[SessionEntry]:
    try:
        return tree.path_to(leaf_id)
    except UnknownEntryError:
        raise CompactionError(f"cannot compact: entry {leaf_id} is not in this session") from None


async def compact_session(
    store: SessionStore,
    session_path: Path,
    leaf_id: str | None,
    model: ModelSpec,
    options: StreamOptions,
    settings: CompactionBudget,
    custom_instructions: str | None,
    entry_id: str,
    entry_timestamp: str,
    reason: CompactionReason,
    abort: asyncio.Event | None = None,
    before: BeforeCompact | None = None,
) -> CompactionOutcome | None:
    """Compact the branch ending at `leaf_id` and append the `compaction` entry
    `entry_id` as its child. `before` may cancel it (CompactionCancelled) or supply it.

    Returns the stored outcome without a model call when `entry_id` already exists (an
    earlier attempt finished). When there is nothing to compact, an automatic compaction
    (`threshold`, `overflow`) returns None and a `manual` one raises NothingToCompactError.
    The `enabled` setting is the caller's to check: a manual compaction runs regardless.
    """
    tree = store.load(session_path).tree
    existing = tree.get(entry_id)
    if existing is not None:
        return _stored_outcome(existing)

    path = _branch_path(tree, leaf_id) if leaf_id is not None else []
    plan = plan_compaction(path, settings)
    if plan is None:
        if reason != "manual":
            return None
        if path and isinstance(path[-1], CompactionEntry):
            raise NothingToCompactError("Already compacted: the conversation ends with a compaction")
        raise NothingToCompactError("Nothing to compact: the conversation has no messages yet")

    supplied = await before(plan) if before is not None else None
    if supplied == CANCEL:
        raise CompactionCancelled("an extension cancelled the compaction")
    outcome = supplied or await summarize(plan, model, options, custom_instructions, abort)
    entry = CompactionEntry(
        id=entry_id,
        parent_id=leaf_id,
        timestamp=entry_timestamp,
        summary=outcome.summary,
        first_kept_entry_id=outcome.first_kept_entry_id,
        tokens_before=outcome.tokens_before,
        details=outcome.details.to_json_dict(),
        from_hook=supplied is not None,
    )
    if store.append(session_path, [entry]) == 0:
        # Another attempt wrote this id meanwhile; the file is the truth.
        stored = store.load(session_path).tree.get(entry_id)
        assert stored is not None
        return _stored_outcome(stored)
    return outcome


# --- branch summaries ------------------------------------------------------------------


async def summarize_branch(
    plan: BranchSummaryPlan,
    model: ModelSpec,
    options: StreamOptions,
    *,
    entry_id: str,
    parent_id: str | None,
    entry_timestamp: str,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    reserve_tokens: int = DEFAULT_BRANCH_RESERVE_TOKENS,
    abort: asyncio.Event | None = None,
) -> BranchSummaryEntry:
    """The `branch_summary` entry for an abandoned branch, placed under `parent_id` (the
    new leaf; None at the root). The newest messages that fit the model's window minus
    `reserve_tokens` are summarized. Raises CompactionError (CompactionAborted on abort)."""
    messages = newest_within(plan.messages, model.context_window - reserve_tokens)
    request = branch_summary_request(messages, custom_instructions, replace_instructions)
    budget = _output_budget(model, BRANCH_SUMMARY_MAX_TOKENS)
    summary = await _summary_text(model, request, options, budget, "Summarizing the branch", abort)
    return BranchSummaryEntry(
        id=entry_id,
        parent_id=parent_id,
        timestamp=entry_timestamp,
        from_id=parent_id or "root",
        summary=summary + file_lists(plan.read_files, plan.modified_files),
        details=CompactionDetails(
            read_files=plan.read_files, modified_files=plan.modified_files
        ).to_json_dict(),
        from_hook=False,
    )


async def summarize_branch_session(
    store: SessionStore,
    session_path: Path,
    old_leaf_id: str | None,
    target_id: str,
    new_leaf_id: str | None,
    model: ModelSpec,
    options: StreamOptions,
    entry_id: str,
    entry_timestamp: str,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    reserve_tokens: int = DEFAULT_BRANCH_RESERVE_TOKENS,
    abort: asyncio.Event | None = None,
) -> BranchSummaryEntry | None:
    """Summarize what moving from `old_leaf_id` to `target_id` abandons and append the
    entry under `new_leaf_id` (the target, or its parent when the user re-edits a
    message). None when nothing with content is left behind; a retry returns the entry
    its earlier attempt stored."""
    tree = store.load(session_path).tree
    existing = tree.get(entry_id)
    if existing is not None:
        return _stored_branch_summary(existing)
    try:
        plan = plan_branch_summary(tree, old_leaf_id, target_id)
    except UnknownEntryError as exc:
        raise CompactionError(f"cannot summarize the branch: {exc.args[0]}") from None
    if plan is None:
        return None
    entry = await summarize_branch(
        plan,
        model,
        options,
        entry_id=entry_id,
        parent_id=new_leaf_id,
        entry_timestamp=entry_timestamp,
        custom_instructions=custom_instructions,
        replace_instructions=replace_instructions,
        reserve_tokens=reserve_tokens,
        abort=abort,
    )
    if store.append(session_path, [entry]) == 0:
        stored = store.load(session_path).tree.get(entry_id)
        assert stored is not None
        return _stored_branch_summary(stored)
    return entry


def _stored_branch_summary(entry: SessionEntry) -> BranchSummaryEntry:
    if not isinstance(entry, BranchSummaryEntry):
        raise CompactionError(
            f"entry {entry.id} already exists and is a {entry.type} entry, not a branch summary"
        )
    return entry
