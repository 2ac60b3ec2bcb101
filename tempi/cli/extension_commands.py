"""Extensions' slash commands and input handlers in the front ends: `/name args` typed in
interactive mode, sent over RPC or given to `tempi -p` runs the command here, in the front
end's process, and other text passes the extensions' `input` handlers here first."""

from __future__ import annotations

import sys
from typing import Any

from tempi.cli.errors import UserError
from tempi.extensions.api import ExtensionContext
from tempi.extensions.commands import CommandOutcome, extension_commands, find_command, run_command
from tempi.extensions.models import ExtensionProblem
from tempi.extensions.user_input import InputEvent, InputSource, run_input


def command_context(session_id: str, session_file: str, cwd: str) -> ExtensionContext:
    return ExtensionContext(cwd=cwd, session_id=session_id, session_file=session_file)


async def outcome_of(text: str, paths: list[str], ctx: ExtensionContext) -> CommandOutcome | None:
    """What the extension command `text` names did, or None when it names none."""
    found = find_command(paths, text) if paths else None
    if found is None:
        return None
    command, args = found
    return await run_command(command, args, ctx)


async def after_input_handlers(
    text: str, paths: list[str], ctx: ExtensionContext, source: InputSource
) -> tuple[str | None, list[ExtensionProblem]]:
    """What the input handlers made of the user's text (None: one handled it, send nothing)."""
    if not paths:
        return text, []
    outcome = await run_input(paths, InputEvent(text, source), ctx)
    return (None if outcome.handled else outcome.text), outcome.problems


def input_error_event(problem: ExtensionProblem) -> dict[str, Any]:
    return {
        "type": "extension_error",
        "extensionPath": problem.extension,
        "event": "input",
        "error": problem.error,
    }


async def prompts_after_extensions(prompts: list[str], paths: list[str], ctx: ExtensionContext) -> list[str]:
    """The prompts, each extension command replaced by the prompt it made (or dropped), the
    rest as the input handlers left them (dropped when one handled it)."""
    kept: list[str] = []
    for text in prompts:
        outcome = await outcome_of(text, paths, ctx)
        if outcome is None:
            changed, problems = await after_input_handlers(text, paths, ctx, "interactive")
            for problem in problems:
                print(f"tempi: extension {problem.extension}: {problem.error}", file=sys.stderr)
            if changed is not None:
                kept.append(changed)
        elif outcome.error is not None:
            raise UserError(outcome.error)
        elif outcome.prompt is not None:
            kept.append(outcome.prompt)
    return kept


def rpc_command_list(paths: list[str]) -> list[dict[str, Any]]:
    return [
        {"name": c.name, "description": c.description, "source": "extension", "path": path}
        for path, c in extension_commands(paths)
    ]
