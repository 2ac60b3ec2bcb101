"""pi's `input` event: what the user typed, before it becomes a prompt. A handler may
return `{"action": "transform", "text": ...}` (the next handler sees the new text),
`{"action": "handled"}` (nothing is sent; later handlers are not asked) or nothing.

It runs in the front end that loaded the extensions (`tempi -p`, interactive mode, RPC
`prompt`), like slash commands and like pi, which runs it in its own process: a handled
input must never start a run, and a transformed one must be the text the session records,
shows and sends. Run on a worker, inside the run's first activity, the original text would
already be the session's prompt (in history, in its events) and a run already started.
Prompts a session gets otherwise (a subagent's task, Slack, pipelines) are not user input."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tempi.extensions.api import ExtensionContext
from tempi.extensions.hooks import call_handler, field_of
from tempi.extensions.loader import describe_failure, load_all
from tempi.extensions.models import ExtensionProblem

InputSource = Literal["interactive", "rpc"]


@dataclass
class InputEvent:
    text: str
    source: InputSource  # "interactive": the terminal (interactive mode, `tempi -p`)
    type: str = "input"


@dataclass
class InputOutcome:
    text: str
    handled: bool = False
    problems: list[ExtensionProblem] = field(default_factory=list)


async def run_input(paths: list[str], event: InputEvent, ctx: ExtensionContext) -> InputOutcome:
    """The text after the extensions' input handlers, in extension order. A handler that
    raises, or answers with an action tempi does not know, is reported and skipped."""
    extensions, _ = load_all(paths)  # the front end reported load problems already
    outcome = InputOutcome(event.text)
    for ext in extensions:
        for handler in ext.handlers.get("input", []):
            try:
                result: Any = await call_handler(handler, event, ctx)
                action = field_of(result, "action") if result is not None else "continue"
                if action == "handled":
                    outcome.handled = True
                    return outcome
                if action == "transform":
                    text = field_of(result, "text")
                    if not isinstance(text, str):
                        raise ValueError("a transform must return the new text as 'text'")
                    event.text = outcome.text = text
                elif action not in (None, "continue"):
                    raise ValueError(f"unknown action {action!r}; use continue, transform or handled")
            except Exception as err:
                outcome.problems.append(
                    ExtensionProblem(extension=ext.path, error=f"input hook: {describe_failure(err)}")
                )
    return outcome
