"""The summary activities: compacting a session and summarizing a branch the user left,
around the plain functions of `compaction`."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from tempi.activities.compaction import (
    CompactionAborted,
    CompactionCancelled,
    CompactionError,
    compact_session,
    summarize_branch_session,
)
from tempi.activities.file_turns import FileTurns, anchor_of, outbox_ids
from tempi.activities.heartbeat import Heartbeater
from tempi.activities.model_options import CredentialResolver, stream_options
from tempi.activities.out_of_space import out_of_space_is_final
from tempi.activities.session_outbox import write_outbox
from tempi.config.settings import settings_at_call
from tempi.extensions.compaction_hook import BeforeCompactHooks
from tempi.extensions.hooks import context_for
from tempi.extensions.models import ExtensionProblem
from tempi.store.session_store import SessionStore
from tempi.workflows import activity_names as names
from tempi.workflows.activity_payloads import (
    BranchSummaryInput,
    BranchSummaryResult,
    CompactActivityResult,
    CompactInput,
    CompactResult,
)


class CompactionActivities:
    """The summary calls of `SessionActivities`."""

    store: SessionStore
    credentials: CredentialResolver

    @activity.defn(name=names.COMPACT)
    async def compact(self, inp: CompactInput) -> CompactActivityResult:
        turns = FileTurns(
            inp.file, [*outbox_ids(inp.outbox), inp.entry_id], anchor_of(inp.outbox, inp.leaf_id)
        )
        with out_of_space_is_final(inp.file.session_path):
            outbox, _ = turns.continue_from_file(inp.outbox)
            write_outbox(self.store, inp.file, outbox)
            turns.settle()
        try:
            options = await stream_options(
                self.credentials,
                inp.model,
                inp.thinking_level,
                inp.file.session_id,
                settings_at_call(Path(inp.file.cwd)),
            )
        except ApplicationError as err:
            return CompactActivityResult(error=f"Compaction failed: {err.message}")
        hooks = (
            BeforeCompactHooks(inp.extensions, context_for(inp.file), inp.reason, inp.custom_instructions)
            if inp.extensions
            else None
        )

        def hooks_problems() -> list[ExtensionProblem]:
            return hooks.problems if hooks is not None else []

        try:
            async with Heartbeater():
                outcome = await compact_session(
                    self.store,
                    Path(inp.file.session_path),
                    inp.leaf_id,
                    inp.model,
                    options,
                    inp.policy,
                    inp.custom_instructions,
                    inp.entry_id,
                    inp.entry_timestamp,
                    inp.reason,
                    before=hooks,
                )
        except CompactionCancelled:
            # pi reports an extension's cancel as an aborted compaction.
            return CompactActivityResult(
                aborted=True, error="An extension cancelled the compaction.", problems=hooks_problems()
            )
        except (CompactionAborted, asyncio.CancelledError):
            return CompactActivityResult(aborted=True, error="Compaction was aborted.")
        except CompactionError as err:
            return CompactActivityResult(error=f"Compaction failed: {err}", problems=hooks_problems())
        if outcome is None:
            return CompactActivityResult(error="Nothing to compact.")
        with out_of_space_is_final(inp.file.session_path):
            turns.settle()
        return CompactActivityResult(
            outcome=CompactResult.model_validate(outcome.to_json_dict()), problems=hooks_problems()
        )

    @activity.defn(name=names.SUMMARIZE_BRANCH)
    async def summarize_branch(self, inp: BranchSummaryInput) -> BranchSummaryResult:
        try:
            options = await stream_options(
                self.credentials,
                inp.model,
                inp.thinking_level,
                inp.file.session_id,
                settings_at_call(Path(inp.file.cwd)),
            )
        except ApplicationError as err:
            return BranchSummaryResult(error=f"Branch summary failed: {err.message}")
        turns = FileTurns(inp.file, [inp.entry_id], inp.old_leaf_id)
        try:
            async with Heartbeater():
                entry = await summarize_branch_session(
                    self.store,
                    Path(inp.file.session_path),
                    inp.old_leaf_id,
                    inp.target_id,
                    inp.new_leaf_id,
                    inp.model,
                    options,
                    inp.entry_id,
                    inp.entry_timestamp,
                    inp.custom_instructions,
                )
        except CompactionError as err:
            return BranchSummaryResult(error=f"Branch summary failed: {err}")
        if entry is None:
            return BranchSummaryResult()
        with out_of_space_is_final(inp.file.session_path):
            turns.settle()
        return BranchSummaryResult(entry_id=entry.id, summary=entry.summary)
