"""Slash commands extensions register (`tempi.register_command`): listed for RPC's
get_commands and run in the front end's own process when a user types `/name args`, as
pi runs them in its own. A handler `(args, ctx)` that returns text has that text sent to
the model as the prompt; one that returns nothing sends nothing."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from tempi.extensions.api import ExtensionContext, RegisteredCommand
from tempi.extensions.loader import describe_failure, load_all


@dataclass(frozen=True)
class CommandOutcome:
    prompt: str | None = None  # what to send to the model
    error: str | None = None  # why the command failed, for the user


def extension_commands(paths: list[str]) -> list[tuple[str, RegisteredCommand]]:
    """(extension path, command) of every loadable extension, in extension order."""
    loaded, _ = load_all(paths)
    return [(ext.path, command) for ext in loaded for command in ext.commands.values()]


def find_command(paths: list[str], text: str) -> tuple[RegisteredCommand, str] | None:
    """The command a `/name args` line names, and its arguments."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    name, _, args = stripped[1:].partition(" ")
    for _, command in extension_commands(paths):
        if command.name == name:
            return command, args.strip()
    return None


async def run_command(command: RegisteredCommand, args: str, ctx: ExtensionContext) -> CommandOutcome:
    if command.handler is None:
        return CommandOutcome()
    try:
        result = command.handler(args, ctx)
        if inspect.isawaitable(result):
            result = await result
    except Exception as err:
        return CommandOutcome(error=f"/{command.name} failed: {describe_failure(err)}")
    return CommandOutcome(prompt=result if isinstance(result, str) and result.strip() else None)
