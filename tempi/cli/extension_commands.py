"""Extensions' slash commands and input handlers in the front ends: `/name args` typed in
interactive mode, sent over RPC or given to `tempi -p` runs the command here, in the front
end's process, and other text passes the extensions' `input` handlers here first."""

from __future__ import annotations

import sys
import uuid
from typing import Any

from tempi.cli.errors import UserError
from tempi.client import SessionClient
from tempi.extensions.api import CommandContext, ExtensionContext, Notice
from tempi.extensions.commands import CommandOutcome, extension_commands, find_command, run_command
from tempi.extensions.models import ExtensionMessage, ExtensionProblem
from tempi.extensions.user_input import InputEvent, InputSource, run_input


def command_context(session_id: str, session_file: str, cwd: str, *, has_ui: bool) -> CommandContext:
    return CommandContext(cwd=cwd, session_id=session_id, session_file=session_file, has_ui=has_ui)


async def deliver_messages(session: SessionClient, messages: list[ExtensionMessage]) -> None:
    """A command's `send_message`s: queued while the session works, a new run when idle."""
    for message in messages:
        await session.prompt(
            message.text, streaming_behavior="followUp" if message.deliver_as == "follow_up" else "steer"
        )


def notify_request(notice: Notice) -> dict[str, Any]:
    """pi's RPC shape of `ctx.ui.notify`: a request no answer is expected to."""
    return {
        "type": "extension_ui_request",
        "id": str(uuid.uuid4()),
        "method": "notify",
        "message": notice.message,
        "notifyType": notice.notify_type,
    }


async def outcome_of(text: str, paths: list[str], ctx: CommandContext) -> CommandOutcome | None:
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


async def prompts_after_extensions(prompts: list[str], paths: list[str], ctx: CommandContext) -> list[str]:
    """The prompts, each extension command replaced by the prompt it made (or dropped) and
    the messages it sent, the rest as the input handlers left them (dropped when one
    handled it). Print mode runs them one after another, so a message is one more prompt;
    notices go to stderr."""
    kept: list[str] = []
    for text in prompts:
        outcome = await outcome_of(text, paths, ctx)
        if outcome is None:
            changed, problems = await after_input_handlers(text, paths, ctx, "interactive")
            for problem in problems:
                print(f"tempi: extension {problem.extension}: {problem.error}", file=sys.stderr)
            if changed is not None:
                kept.append(changed)
            continue
        for notice in outcome.notices:
            print(f"tempi: {notice.message}", file=sys.stderr)
        if outcome.error is not None:
            raise UserError(outcome.error)
        if outcome.prompt is not None:
            kept.append(outcome.prompt)
        kept.extend(message.text for message in outcome.messages)
    return kept


def rpc_command_list(paths: list[str]) -> list[dict[str, Any]]:
    return [
        {"name": c.name, "description": c.description, "source": "extension", "path": path}
        for path, c in extension_commands(paths)
    ]
