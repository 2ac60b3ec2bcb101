"""Extensions' slash commands in the front ends: `/name args` typed in interactive mode,
sent over RPC or given to `tempi -p` runs the command here, in the front end's process."""

from __future__ import annotations

from typing import Any

from tempi.cli.errors import UserError
from tempi.extensions.api import ExtensionContext
from tempi.extensions.commands import CommandOutcome, extension_commands, find_command, run_command


def command_context(session_id: str, session_file: str, cwd: str) -> ExtensionContext:
    return ExtensionContext(cwd=cwd, session_id=session_id, session_file=session_file)


async def outcome_of(text: str, paths: list[str], ctx: ExtensionContext) -> CommandOutcome | None:
    """What the extension command `text` names did, or None when it names none."""
    found = find_command(paths, text) if paths else None
    if found is None:
        return None
    command, args = found
    return await run_command(command, args, ctx)


async def prompts_after_commands(prompts: list[str], paths: list[str], ctx: ExtensionContext) -> list[str]:
    """The prompts, each extension command replaced by the prompt it made (or dropped)."""
    kept: list[str] = []
    for text in prompts:
        outcome = await outcome_of(text, paths, ctx)
        if outcome is None:
            kept.append(text)
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
