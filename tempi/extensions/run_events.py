"""pi's observational run events for extensions: `turn_start`, `turn_end` and `agent_end`.
They run inside activities the session runs anyway, so a turn costs no extra round trip to
the server: a turn's `turn_start` inside its `call_llm` before the request, the `turn_end`
of the turn before it in that same activity (the previous answer and its tool results are
the newest messages of the context it rebuilt), and the run's last `turn_end` with
`agent_end` in the one activity a run ends with. So a turn_end is seen when the next turn
starts, not the moment its tools return, and, as every activity may be retried after a lost
worker, a handler may see an event twice. A handler that raises is reported, never fatal."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tempi.agent.llm_context import LlmContext
from tempi.extensions.api import ExtensionAPI, ExtensionContext, call_scope
from tempi.extensions.hooks import call_handler
from tempi.extensions.loader import describe_failure, load_all
from tempi.extensions.models import ExtensionEffects, ExtensionProblem


@dataclass
class TurnEvent:
    type: str  # "turn_start" or "turn_end"
    turn_index: int  # counted from 0 in each run
    message: dict[str, Any] | None = None  # turn_end: the turn's answer (pi's JSON)
    tool_results: list[dict[str, Any]] = field(default_factory=list)  # turn_end: its tool results


@dataclass
class AgentEndEvent:
    messages: list[dict[str, Any]]  # the run's messages, from its prompt on (pi's JSON)
    type: str = "agent_end"


def turn_end_of(messages: list[dict[str, Any]], turn_index: int) -> TurnEvent | None:
    """The turn_end of the turn whose answer is the newest assistant message in `messages`."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
    if last is None:
        return None
    results = [m for m in messages[last + 1 :] if m.get("role") == "toolResult"]
    return TurnEvent("turn_end", turn_index, messages[last], results)


async def _deliver(
    extensions: list[ExtensionAPI], event: Any, ctx: ExtensionContext, problems: list[ExtensionProblem]
) -> None:
    for ext in extensions:
        for handler in ext.handlers.get(event.type, []):
            try:
                await call_handler(handler, event, ctx)
            except Exception as err:
                problems.append(
                    ExtensionProblem(
                        extension=ext.path,
                        event=event.type,
                        error=f"{event.type} hook: {describe_failure(err)}",
                    )
                )


async def run_events(
    paths: list[str], ctx: ExtensionContext, events: list[TurnEvent | AgentEndEvent]
) -> tuple[list[ExtensionProblem], ExtensionEffects]:
    """Deliver `events` in order; what failed, and what the handlers asked of the session."""
    extensions, _ = load_all(paths)  # one this worker cannot load is reported by the hooks that must block
    problems: list[ExtensionProblem] = []
    wanted = {e.type for e in events}
    if not any(wanted & ext.handlers.keys() for ext in extensions):
        return problems, ExtensionEffects()
    with call_scope(ctx) as scope:
        for event in events:
            await _deliver(extensions, event, ctx, problems)
    return problems, scope.effects


async def turn_hooks(
    paths: list[str], ctx: ExtensionContext, context: LlmContext, turn_index: int
) -> tuple[list[ExtensionProblem], ExtensionEffects]:
    """Inside a turn's call_llm, before the request: the previous turn's turn_end (from the
    rebuilt context), then this turn's turn_start."""
    events: list[TurnEvent | AgentEndEvent] = []
    if turn_index > 0:
        ended = turn_end_of([m.to_json_dict() for m in context.messages], turn_index - 1)
        if ended is not None:
            events.append(ended)
    events.append(TurnEvent("turn_start", turn_index))
    return await run_events(paths, ctx, events)
