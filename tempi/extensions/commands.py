"""Slash commands extensions register (`tempi.register_command`): listed for RPC's
get_commands and run in the front end's own process when a user types `/name args`, as
pi runs them in its own. A handler `(args, ctx)` that returns text has that text sent to
the model as the prompt; one that returns nothing sends nothing. It may also show notices
(`ctx.ui.notify`) and queue messages (`tempi.send_message`), which the front end delivers
after it."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field

from tempi.extensions.api import CommandContext, CommandUI, Notice, RegisteredCommand, call_scope
from tempi.extensions.loader import describe_failure, load_all
from tempi.extensions.models import ExtensionMessage


@dataclass(frozen=True)
class CommandOutcome:
    prompt: str | None = None  # what to send to the model
    error: str | None = None  # why the command failed, for the user
    notices: list[Notice] = field(default_factory=list)
    messages: list[ExtensionMessage] = field(default_factory=list)  # after the prompt, in order


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


async def run_command(command: RegisteredCommand, args: str, ctx: CommandContext) -> CommandOutcome:
    if command.handler is None:
        return CommandOutcome()
    ctx = dataclasses.replace(ctx, ui=CommandUI())  # this run's notices only
    with call_scope(ctx) as scope:
        try:
            result = command.handler(args, ctx)
            if inspect.isawaitable(result):
                result = await result
        except Exception as err:
            return CommandOutcome(
                error=f"/{command.name} failed: {describe_failure(err)}", notices=ctx.ui.notices
            )
    if scope.effects.custom_entries:
        # A command runs in the front end, outside any activity that could record the entry.
        return CommandOutcome(
            error=f"/{command.name}: append_entry works in event handlers and tools, not in commands",
            notices=ctx.ui.notices,
        )
    return CommandOutcome(
        prompt=result if isinstance(result, str) and result.strip() else None,
        notices=ctx.ui.notices,
        messages=scope.effects.messages,
    )
