"""Compaction: summarize the older part of the context into one entry, when the context
nears the window (threshold), overflowed it (overflow), or the user asks (manual)."""

from __future__ import annotations

import asyncio
from typing import Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import AssistantMessage
    from tempi.agent.model_spec import ModelSpec
    from tempi.agent.session_entries import iso_timestamp
    from tempi.workflows import activity_names as act
    from tempi.workflows.activity_payloads import CompactActivityResult, CompactInput, CompactResult
    from tempi.workflows.session.activity_errors import cause
    from tempi.workflows.session.activity_options import Activities
    from tempi.workflows.session.entries import EntryWriter, now_ms
    from tempi.workflows.session.event_log import EventLog
    from tempi.workflows.session.extension_route import ExtensionTools
    from tempi.workflows.session.run_control import RunControl
    from tempi.workflows.session_types import CarriedState, CompactionPolicy, SessionConfig

CompactionReason = Literal["manual", "threshold", "overflow"]


def over_threshold(message: AssistantMessage, model: ModelSpec, policy: CompactionPolicy) -> bool:
    """pi's threshold: auto-compaction is on and the last answer left less than the reserve."""
    u = message.usage
    tokens = u.total_tokens or (u.input + u.output + u.cache_read + u.cache_write)
    return policy.enabled and tokens > model.context_window - policy.reserve_tokens


class Compactor:
    def __init__(
        self,
        config: SessionConfig,
        state: CarriedState,
        log: EventLog,
        entries: EntryWriter,
        control: RunControl,
        activities: Activities,
        extensions: ExtensionTools | None = None,
    ) -> None:
        self.config = config
        self.state = state
        self.log = log
        self.entries = entries
        self.control = control
        self.activities = activities
        self.extensions = extensions
        self.compacting = False

    async def compact_with_events(
        self, reason: CompactionReason, custom_instructions: str | None = None, *, will_retry: bool = False
    ) -> CompactResult | str:
        """Compact, announcing it; returns the result or the error text."""
        self.log.emit({"type": "compaction_start", "reason": reason})
        result = await self._compact(reason, custom_instructions)
        if result.outcome is None:
            error = result.error or "Compaction failed."
            self.log.emit(
                {
                    "type": "compaction_end",
                    "reason": reason,
                    "aborted": result.aborted,
                    "willRetry": False,
                    "errorMessage": error,
                }
            )
            return error
        self.log.emit(
            {
                "type": "compaction_end",
                "reason": reason,
                "result": result.outcome.to_json_dict(),
                "aborted": False,
                "willRetry": will_retry,
            }
        )
        return result.outcome

    async def _compact(
        self, reason: CompactionReason, custom_instructions: str | None
    ) -> CompactActivityResult:
        entry_id = self.entries.new_id()
        self.compacting = True
        try:
            async with self.entries.store_lock:
                outbox = self.entries.take_outbox()
                inp = CompactInput(
                    file=self.entries.file(),
                    outbox=outbox,
                    leaf_id=self.state.leaf_id,
                    model=self.state.model,
                    thinking_level=self.state.thinking_level,
                    policy=self.config.compaction,
                    custom_instructions=custom_instructions,
                    entry_id=entry_id,
                    entry_timestamp=iso_timestamp(now_ms()),
                    reason=reason,
                    # Their session_before_compact handlers run inside the activity.
                    extensions=self.extensions.active() if self.extensions is not None else [],
                )
                task = asyncio.ensure_future(self.activities.execute(act.COMPACT, inp, CompactActivityResult))
                with self.entries.writing_below_leaf():
                    try:
                        result: CompactActivityResult = await self.control.track(task)
                    except (ActivityError, CancelledError, asyncio.CancelledError) as err:
                        self.entries.put_back(outbox)
                        return CompactActivityResult(
                            error=f"Compaction failed: {cause(err)}", aborted=self.control.abort_requested
                        )
                    if result.outcome is not None:
                        self.entries.written(entry_id)
                if self.extensions is not None:
                    self.extensions.report(result.problems, "session_before_compact")
                return result
        finally:
            self.compacting = False
