"""What the editor's text becomes when Enter sends it: the answer to a question, a slash
command (tempi's or an extension's), a shell command, or a message to the session."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio.service import RPCError

from tempi.agent.messages import ImageContent
from tempi.cli import slash_input
from tempi.cli.extension_commands import after_input_handlers, command_context, outcome_of
from tempi.cli.interactive import commands
from tempi.cli.interactive.render import bash_block, notice
from tempi.cli.interactive.status_line import CANCELLING_TEXT, STARTING_SERVER_TEXT
from tempi.cli.server_link import NOT_SENT_TEXT
from tempi.cli.session_choice import reopen_if_closed
from tempi.client import SessionRefused
from tempi.client.session import StreamingBehavior
from tempi.extensions.commands import CommandOutcome, find_command
from tempi.workers.temporal_connection import TemporalSettingsError

if TYPE_CHECKING:
    from tempi.cli.interactive.app import InteractiveApp

# How an extension command's ctx.ui.notify(message, type) looks in the transcript.
NOTICE_STYLES = {"info": "cyan", "warning": "yellow", "error": "red"}


def submit(app: InteractiveApp, *, follow_up: bool) -> None:
    text = app.input.text
    if app.question is not None:
        # An answer (perhaps a pasted code) goes to the question, not to the history.
        question, app.question = app.question, None
        app.input.reset()
        if not question.answer.done():
            question.answer.set_result(text)
        app.application.invalidate()
        return
    if not text.strip():
        return
    app.input.reset(append_to_history=True)
    app.spawn(handle_input(app, text, follow_up=follow_up))


async def handle_input(app: InteractiveApp, text: str, *, follow_up: bool) -> None:
    stripped = text.strip()
    if stripped.startswith("/"):
        found = commands.command_for(stripped, app.planned.templates, app.skills)
        if found is not None:
            command, arg = found
            await command.run(app, arg)
            return
        if (ran := await _extension_command(app, stripped)) is not None:
            await _show_command_outcome(app, ran, follow_up=follow_up)
            return
        refused = slash_input.refusal(stripped, app.planned.templates, app.skills, list(commands.BY_NAME))
        if refused is not None:
            # As a message that could not be sent: back in the editor to be corrected.
            back_to_editor(app, text)
            await app.show(notice(refused, "red"))
            return
    if app.link.lost and not await _server_back(app):
        # Sending would wait for the server; keep the text instead of losing it.
        back_to_editor(app, text)
        app.set_status(NOT_SENT_TEXT)
        return
    if stripped.startswith("!") and len(stripped) > 1:
        await run_bash(app, stripped)
        return
    changed = await _after_input_handlers(app, text)
    if changed is None:
        return
    await send(app, slash_input.expand_input(changed, app.planned.templates, app.skills), follow_up=follow_up)


async def _server_back(app: InteractiveApp) -> bool:
    """The background server is gone (`tempi server stop --force`): a message starts it
    again, as any tempi command would, and goes once the server answers."""
    if not app.link.can_restart:
        return False
    app.set_status(STARTING_SERVER_TEXT)
    try:
        back = await app.link.bring_back()
    except (RuntimeError, OSError, TemporalSettingsError) as err:  # its log's last words, a key mismatch
        await app.show(notice(f"The tempi server did not start again: {err}", "red"))
        return False
    finally:
        app.clear_status(STARTING_SERVER_TEXT)
    return back


def back_to_editor(app: InteractiveApp, text: str) -> None:
    """Put `text` back in the editor, unless the person has started typing something else."""
    if not app.input.text:
        app.input.text = text
        app.input.cursor_position = len(text)


async def _after_input_handlers(app: InteractiveApp, text: str) -> str | None:
    paths = app.planned.options.extensions or []
    if not paths:
        return text
    state = await app.session.state()
    changed, problems = await after_input_handlers(
        text,
        paths,
        command_context(state.session_id, state.session_file, state.cwd, has_ui=True),
        "interactive",
    )
    for problem in problems:
        await app.show(notice(f"extension {problem.extension}: {problem.error}", "red"))
    return changed


async def _extension_command(app: InteractiveApp, text: str) -> CommandOutcome | None:
    paths = app.planned.options.extensions or []
    if not paths or find_command(paths, text) is None:
        return None
    state = await app.session.state()
    return await outcome_of(
        text, paths, command_context(state.session_id, state.session_file, state.cwd, has_ui=True)
    )


async def _show_command_outcome(app: InteractiveApp, ran: CommandOutcome, *, follow_up: bool) -> None:
    for shown in ran.notices:
        await app.show(notice(shown.message, NOTICE_STYLES[shown.notify_type]))
    if ran.error is not None:
        await app.show(notice(ran.error, "red"))
        return
    if ran.prompt is not None:
        await send(app, ran.prompt, follow_up=follow_up)
    for message in ran.messages:
        await send(app, message.text, follow_up=message.deliver_as == "follow_up")


async def send_initial(app: InteractiveApp, prompts: list[str], images: list[ImageContent]) -> None:
    """The command line's prompts, as `pi "prompt"` sends them: the first at once, the
    rest queued to follow it."""
    for index, text in enumerate(prompts):
        if index == 0 and images:
            expanded = slash_input.expand_input(text, app.planned.templates, app.skills)
            await app.session.prompt(expanded, images=images, streaming_behavior="followUp")
        else:
            await handle_input(app, text, follow_up=True)


async def send(app: InteractiveApp, text: str, *, follow_up: bool) -> None:
    # With a behaviour set, the session queues the message if it is working and runs
    # it as a prompt if not, so there is no race with a run that is just ending.
    behavior: StreamingBehavior = "followUp" if follow_up else "steer"
    try:
        try:
            await app.session.prompt(text, streaming_behavior=behavior)
        except RPCError:
            if not await _reopen_if_closed(app):
                raise
            await app.session.prompt(text, streaming_behavior=behavior)
    except SessionRefused as err:
        await app.show(notice(f"The session refused the message: {err}", "red"))


async def _reopen_if_closed(app: InteractiveApp) -> bool:
    """Continue the session from its file if it closed after waiting past its idle time
    (a file that cannot be continued is a UserError, shown as any failed command is)."""
    reopened = await reopen_if_closed(app.service, app.opened, app.planned.options, app.planned.registry.find)
    if reopened is None:
        return False
    await app.use_session(reopened, history=False)
    await app.show(notice("The session had closed while idle; it goes on from its file.", "yellow"))
    return True


async def run_bash(app: InteractiveApp, line: str) -> None:
    private = line.startswith("!!")
    command = line[2:] if private else line[1:]
    if not command.strip():
        return
    app.bash_running = command
    app.application.invalidate()
    try:
        result = await app.session.bash(command, exclude_from_context=private)
    finally:
        app.bash_running = None
        app.clear_status(CANCELLING_TEXT)
    outcome = bash_block(
        command, result.output, result.exit_code, result.cancelled, expanded=app.display.expanded
    )
    if outcome.full_output is not None:
        app.view.last_full_output = outcome.full_output
    await app.show(outcome.block)
