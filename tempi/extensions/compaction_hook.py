"""pi's `session_before_compact` for extensions: asked inside the compaction activity with
what is about to be summarized; a handler may return `{"cancel": True}` (no compaction) or
`{"compaction": {"summary": ..., "firstKeptEntryId"?, "tokensBefore"?, "details"?}}` (stored
instead of asking the model). The first handler that answers decides. Only the activity's
result, the compaction entry or the cancellation, reaches the workflow."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tempi.agent.compaction import CompactionDetails, CompactionOutcome, CompactionPlan
from tempi.extensions.api import ExtensionContext
from tempi.extensions.hooks import call_handler, field_of
from tempi.extensions.loader import describe_failure, load_all
from tempi.extensions.models import ExtensionProblem


@dataclass
class BeforeCompactEvent:
    reason: str  # "manual", "threshold" or "overflow"
    custom_instructions: str | None
    first_kept_entry_id: str
    messages_to_summarize: list[dict[str, Any]]  # pi's messages
    turn_prefix_messages: list[dict[str, Any]]
    is_split_turn: bool
    previous_summary: str | None
    tokens_before: int
    type: str = "session_before_compact"


@dataclass
class BeforeCompactHooks:
    """The `before` callback of `compact_session`, over the session's extensions; the
    problems it met are reported with the activity's result."""

    paths: list[str]
    ctx: ExtensionContext
    reason: str
    custom_instructions: str | None
    problems: list[ExtensionProblem] = field(default_factory=list)

    async def __call__(self, plan: CompactionPlan) -> CompactionOutcome | Literal["cancel"] | None:
        extensions, problems = load_all(self.paths)
        self.problems += problems
        event = BeforeCompactEvent(
            reason=self.reason,
            custom_instructions=self.custom_instructions,
            first_kept_entry_id=plan.first_kept_entry_id,
            messages_to_summarize=[m.to_json_dict() for m in plan.messages_to_summarize],
            turn_prefix_messages=[m.to_json_dict() for m in plan.turn_prefix_messages],
            is_split_turn=plan.is_split_turn,
            previous_summary=plan.previous_summary,
            tokens_before=plan.tokens_before,
        )
        for ext in extensions:
            for handler in ext.handlers.get("session_before_compact", []):
                try:
                    result = await call_handler(handler, event, self.ctx)
                    if result is None:
                        continue
                    if field_of(result, "cancel"):
                        return "cancel"
                    supplied = field_of(result, "compaction")
                    if supplied is not None:
                        return _outcome(supplied, plan)
                except Exception as err:
                    self.problems.append(
                        ExtensionProblem(
                            extension=ext.path, error=f"session_before_compact hook: {describe_failure(err)}"
                        )
                    )
        return None


def _outcome(supplied: Any, plan: CompactionPlan) -> CompactionOutcome:
    summary = field_of(supplied, "summary")
    if not isinstance(summary, str) or not summary.strip():
        # An empty summary would silently erase the history it replaces.
        raise ValueError("the compaction it returned has no summary text")
    first_kept = field_of(supplied, "firstKeptEntryId", "first_kept_entry_id") or plan.first_kept_entry_id
    tokens_before = field_of(supplied, "tokensBefore", "tokens_before")
    details = field_of(supplied, "details")
    return CompactionOutcome(
        summary=summary,
        first_kept_entry_id=str(first_kept),
        tokens_before=tokens_before if isinstance(tokens_before, int) else plan.tokens_before,
        details=CompactionDetails.model_validate(details if isinstance(details, dict) else {}),
    )
