"""The interactive loop: an inline prompt_toolkit application under the terminal's own
scrollback. Finished output is printed above it for good; what is still changing (the
streaming answer, running tools, the queue) lives in the application's few bottom lines."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prompt_toolkit.application import Application, run_in_terminal
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import ANSI, StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import (
    ConditionalContainer,
    Dimension,
    FormattedTextControl,
    HSplit,
    Layout,
    Window,
)
from prompt_toolkit.layout.controls import BufferControl
from prompt_toolkit.layout.menus import CompletionsMenu
from prompt_toolkit.styles import Style
from rich.console import RenderableType
from temporalio.service import RPCError

from tempi.agent.messages import ImageContent
from tempi.agent.skills import Skill
from tempi.cli import slash_input
from tempi.cli.extension_commands import after_input_handlers, command_context, outcome_of
from tempi.cli.git_branch import git_branch
from tempi.cli.interactive import commands
from tempi.cli.interactive.footer import FooterInfo, answers_in, usage_tokens
from tempi.cli.interactive.input_editor import InputCompleter, build_input_buffer, history_for
from tempi.cli.interactive.key_bindings import add_pi_keys, modified_keys
from tempi.cli.interactive.picker import Picker
from tempi.cli.interactive.render import Display, LiveView, bash_block, history_blocks, notice, to_ansi
from tempi.cli.interactive.startup_header import loaded_resources
from tempi.cli.open_clients import ClientMark
from tempi.cli.plan import PlannedRun
from tempi.cli.queued_messages import editor_text
from tempi.cli.server_link import NOT_SENT_TEXT, ServerLink, link_for
from tempi.cli.session_choice import OpenSession, reopen_if_closed
from tempi.client import EventFollower, SessionClient, SessionRefused, SessionService
from tempi.client.events import POLL_INTERVAL_S
from tempi.client.session import StreamingBehavior
from tempi.client.transcript import context_messages, context_usage, load_at_leaf
from tempi.extensions.commands import CommandOutcome, find_command
from tempi.store.session_store import SessionStore
from tempi.workers.temporal_connection import TemporalSettingsError

CTRL_C_WINDOW_S = 2.0
# How long leaving may wait for the server to say whether the session is still working.
FAREWELL_WAIT_S = 3.0
STATUS_SHOWN_S = 4.0
ALT_KEY_WAIT_S = 0.01
# How long a lone Esc byte waits for the rest of an escape sequence (which a terminal sends
# in one write): this much of every abort by Esc.
ESCAPE_SEQUENCE_WAIT_S = 0.03
# Statuses that say something is under way: gone as soon as it is done.
ABORTING_TEXT = "Aborting…"
CANCELLING_TEXT = "Cancelling the command…"
STARTING_SERVER_TEXT = "Starting the tempi server again…"
# How an extension command's ctx.ui.notify(message, type) looks in the transcript.
NOTICE_STYLES = {"info": "cyan", "warning": "yellow", "error": "red"}
# Room the editor, queue and footer need below the live area.
RESERVED_ROWS = 9

STYLE = Style.from_dict(
    {
        "footer": "#888888",
        "rule": "#444444",
        "prompt": "bold ansicyan",
        "status": "ansiyellow",
        "hint": "#888888",
        "queue": "ansimagenta",
        "picker.title": "bold",
        "picker.hint": "#888888",
        "picker.selected": "reverse",
    }
)


@dataclass
class Question:
    """A question above the editor (a login's); the next Enter answers it."""

    message: str
    placeholder: str | None
    answer: asyncio.Future[str]

    def lines(self) -> StyleAndTextTuples:
        out: StyleAndTextTuples = [("class:picker.title", self.message + "\n")]
        if self.placeholder:
            out.append(("class:picker.hint", f"e.g., {self.placeholder}\n"))
        out.append(("class:picker.hint", "(enter submits, esc cancels)\n"))
        return out


class InteractiveApp:
    def __init__(
        self,
        service: SessionService,
        planned: PlannedRun,
        opened: OpenSession,
        cwd: Path,
        session_dir: Path | None,
    ) -> None:
        self.service = service
        self.planned = planned
        self.opened = opened
        self.cwd = cwd
        self.session_dir = session_dir
        self.args: argparse.Namespace | None = None
        # What /skill:name expands: none when settings turn skill commands off, as in pi.
        self.skills: list[Skill] = planned.skills if planned.settings.enable_skill_commands else []
        self.display = Display(hide_thinking=planned.settings.hide_thinking_block)
        self.view = LiveView(display=self.display)
        self.footer = self._fresh_footer()
        self.picker: Picker | None = None
        # A login going on (Esc cancels it), and the question it asks, if any.
        self.dialog: asyncio.Future[Any] | None = None
        self.question: Question | None = None
        self.status = ""
        self.status_at = 0.0
        self.ctrl_c_at: float | None = None
        self.bash_running: str | None = None
        self.follower: EventFollower | None = None
        self.pump_task: asyncio.Task[None] | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.printing = asyncio.Lock()
        self.link = ServerLink()
        self.mark: ClientMark | None = None
        self.input = build_input_buffer(
            InputCompleter(
                lambda: (
                    commands.completions()
                    + slash_input.resource_completions(self.planned.templates, self.skills)
                ),
                cwd,
            ),
            history_for(),
        )
        self.application: Application[None] = self._build_application()

    # --- the current session -------------------------------------------------------------

    @property
    def session(self) -> SessionClient:
        return self.opened.session

    def _fresh_footer(self) -> FooterInfo:
        config = self.opened.config
        return FooterInfo(
            cwd=str(self.cwd),
            model=config.model,
            thinking_level=config.thinking_level,
            session_id=config.session_id,
            git_branch=git_branch(self.cwd),
        )

    async def use_session(self, opened: OpenSession, *, history: bool) -> None:
        """Show `opened` from now on: its history (if asked) and then its live events."""
        if self.pump_task is not None:
            self.pump_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.pump_task
        previous, self.opened = self.opened, opened
        if previous is not opened:
            await previous.close()
        if self.mark is not None:
            self.mark.show(opened.config.session_id, str(self.cwd), opened.config.session_path)
        self.view = LiveView(display=self.display)
        self.footer = self._fresh_footer()
        start = await self.show_history() if history else None
        # Subagents' own events stay out of the transcript: their `task` call shows them.
        follower = opened.session.follow(from_offset=start or 0, subagents=False)
        if start is None:
            await follower.skip_to_end()
        self.follower = follower
        self.pump_task = asyncio.create_task(self._pump())
        self.spawn(self.refresh_footer())

    async def show_history(self) -> int | None:
        """Print the session so far; if a run is going, return where its events start, so
        that it is shown from its beginning (including what it did while no one watched)."""
        state = await self.session.state()
        loaded, leaf = await load_at_leaf(self.service.store, state.session_file, state.leaf_id)
        messages = context_messages(loaded, leaf)
        run = await self.session.current_run_start() if state.is_streaming else None
        if run is not None:
            messages = [m for m in messages if int(m.get("timestamp") or 0) < run[1]]
        blocks = history_blocks(messages, self.display)
        if blocks:
            title = state.session_name or state.session_id[:8]
            await self.show(notice(f"── session {title}: earlier messages ──"), *blocks)
        if run is not None:
            await self.show(notice("── the agent is still working; following it live ──"))
            return run[0]
        return None

    # --- output -----------------------------------------------------------------------------

    def width(self) -> int:
        return self.application.output.get_size().columns

    def _write(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    async def write_raw(self, text: str) -> None:
        async with self.printing:
            if self.application.is_running:
                await run_in_terminal(lambda: self._write(text), in_executor=False)
            else:
                self._write(text)

    async def show(self, *blocks: RenderableType) -> None:
        """Print finished output above the editor, into the scrollback."""
        if blocks:
            width = self.width()
            await self.write_raw("".join(to_ansi(b, width) for b in blocks))

    def set_status(self, text: str) -> None:
        self.status, self.status_at = text, time.monotonic()
        self.application.invalidate()

    def clear_status(self, text: str) -> None:
        """Take `text` off the status line if it is still there."""
        if self.status == text:
            self.status = ""
            self.application.invalidate()

    def spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(self._guarded(coro))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _guarded(self, coro: Awaitable[Any]) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except RPCError as err:
            await self.show(notice(f"The Temporal server answered with an error: {err}", "red"))
        except Exception as err:  # a failed command is reported; the session goes on
            await self.show(notice(f"Error: {err}", "red"))

    # --- events -----------------------------------------------------------------------------

    async def _pump(self) -> None:
        assert self.follower is not None
        while True:
            try:
                batch = await self.follower.poll()
            except RPCError as err:
                await self._server_trouble(err)
                continue
            await self._server_answered()
            now = time.monotonic()
            blocks: list[RenderableType] = []
            for event in batch:
                blocks.extend(self.view.apply(event, now))
                self._note(event)
            await self.show(*blocks)
            self.application.invalidate()
            if not batch:
                await asyncio.sleep(POLL_INTERVAL_S)

    async def _server_trouble(self, err: RPCError) -> None:
        news = self.link.failed(err)
        if news is not None:
            await self.show(notice(news, "yellow"))
            self.application.invalidate()
        if self.link.lost:
            await self.link.wait_until_up()
        await asyncio.sleep(0.5)  # the server may be up before its worker answers queries

    async def _server_answered(self) -> None:
        news = self.link.answered()
        if news is not None:
            await self.show(notice(news, "green"))
            self.spawn(self.refresh_footer())

    def _note(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        message = event.get("message") or {}
        if kind == "message_end" and message.get("stopReason") == "aborted":
            self.clear_status(ABORTING_TEXT)  # "Aborted." is printed now
        if kind == "message_end" and message.get("role") == "assistant":
            self.footer.saw_answer(message)
            if message.get("usage") and message.get("stopReason") not in ("error", "aborted"):
                self.footer.context_tokens = usage_tokens(message["usage"])
        elif kind == "agent_end":
            self.clear_status(ABORTING_TEXT)
            self.spawn(self.refresh_footer())
        elif kind == "compaction_end":
            self.spawn(self.refresh_footer(estimate_context=True))
        elif kind == "session_info_changed":
            self.footer.session_name = event.get("name") or None

    async def refresh_footer(self, *, estimate_context: bool = False) -> None:
        state = await self.session.state()
        self.footer.update_from_state(state)
        self.footer.git_branch = git_branch(self.cwd)
        loaded, leaf = await load_at_leaf(self.service.store, state.session_file, state.leaf_id)
        self.footer.file_answers = answers_in(loaded.entries) if loaded else {}
        if estimate_context or self.footer.context_tokens is None:
            messages = context_messages(loaded, leaf)
            if estimate_context:
                # After compaction the last answer's usage counts what was dropped.
                messages = [{k: v for k, v in m.items() if k != "usage"} for m in messages]
            # An empty session uses none of the window: pi shows 0.0% there, not "?".
            usage = context_usage(messages, state.model) if messages else {"tokens": 0}
            self.footer.context_tokens = int(usage["tokens"]) if usage else None
        self.application.invalidate()

    # --- input ------------------------------------------------------------------------------

    def submit(self, *, follow_up: bool) -> None:
        text = self.input.text
        if self.question is not None:
            # An answer (perhaps a pasted code) goes to the question, not to the history.
            question, self.question = self.question, None
            self.input.reset()
            if not question.answer.done():
                question.answer.set_result(text)
            self.application.invalidate()
            return
        if not text.strip():
            return
        self.input.reset(append_to_history=True)
        self.spawn(self.handle_input(text, follow_up=follow_up))

    async def handle_input(self, text: str, *, follow_up: bool) -> None:
        stripped = text.strip()
        if stripped.startswith("/"):
            found = commands.command_for(stripped, self.planned.templates, self.skills)
            if found is not None:
                command, arg = found
                await command.run(self, arg)
                return
            if (ran := await self._extension_command(stripped)) is not None:
                await self._show_command_outcome(ran, follow_up=follow_up)
                return
            refused = slash_input.refusal(
                stripped, self.planned.templates, self.skills, list(commands.BY_NAME)
            )
            if refused is not None:
                # As a message that could not be sent: back in the editor to be corrected.
                self.back_to_editor(text)
                await self.show(notice(refused, "red"))
                return
        if self.link.lost and not await self._server_back():
            # Sending would wait for the server; keep the text instead of losing it.
            self.back_to_editor(text)
            self.set_status(NOT_SENT_TEXT)
            return
        if stripped.startswith("!") and len(stripped) > 1:
            await self.run_bash(stripped)
            return
        changed = await self._after_input_handlers(text)
        if changed is None:
            return
        await self.send(
            slash_input.expand_input(changed, self.planned.templates, self.skills), follow_up=follow_up
        )

    async def _server_back(self) -> bool:
        """The background server is gone (`tempi server stop --force`): a message starts it
        again, as any tempi command would, and goes once the server answers."""
        if not self.link.can_restart:
            return False
        self.set_status(STARTING_SERVER_TEXT)
        try:
            back = await self.link.bring_back()
        except (RuntimeError, OSError, TemporalSettingsError) as err:  # its log's last words, a key mismatch
            await self.show(notice(f"The tempi server did not start again: {err}", "red"))
            return False
        finally:
            self.clear_status(STARTING_SERVER_TEXT)
        return back

    def back_to_editor(self, text: str) -> None:
        """Put `text` back in the editor, unless the person has started typing something else."""
        if not self.input.text:
            self.input.text = text
            self.input.cursor_position = len(text)

    async def _after_input_handlers(self, text: str) -> str | None:
        paths = self.planned.options.extensions or []
        if not paths:
            return text
        state = await self.session.state()
        changed, problems = await after_input_handlers(
            text,
            paths,
            command_context(state.session_id, state.session_file, state.cwd, has_ui=True),
            "interactive",
        )
        for problem in problems:
            await self.show(notice(f"extension {problem.extension}: {problem.error}", "red"))
        return changed

    async def _extension_command(self, text: str) -> CommandOutcome | None:
        paths = self.planned.options.extensions or []
        if not paths or find_command(paths, text) is None:
            return None
        state = await self.session.state()
        return await outcome_of(
            text, paths, command_context(state.session_id, state.session_file, state.cwd, has_ui=True)
        )

    async def _show_command_outcome(self, ran: CommandOutcome, *, follow_up: bool) -> None:
        for shown in ran.notices:
            await self.show(notice(shown.message, NOTICE_STYLES[shown.notify_type]))
        if ran.error is not None:
            await self.show(notice(ran.error, "red"))
            return
        if ran.prompt is not None:
            await self.send(ran.prompt, follow_up=follow_up)
        for message in ran.messages:
            await self.send(message.text, follow_up=message.deliver_as == "follow_up")

    async def send_initial(self, prompts: list[str], images: list[ImageContent]) -> None:
        """The command line's prompts, as `pi "prompt"` sends them: the first at once, the
        rest queued to follow it."""
        for index, text in enumerate(prompts):
            if index == 0 and images:
                expanded = slash_input.expand_input(text, self.planned.templates, self.skills)
                await self.session.prompt(expanded, images=images, streaming_behavior="followUp")
            else:
                await self.handle_input(text, follow_up=True)

    async def send(self, text: str, *, follow_up: bool) -> None:
        # With a behaviour set, the session queues the message if it is working and runs
        # it as a prompt if not, so there is no race with a run that is just ending.
        behavior: StreamingBehavior = "followUp" if follow_up else "steer"
        try:
            try:
                await self.session.prompt(text, streaming_behavior=behavior)
            except RPCError:
                if not await self._reopen_if_closed():
                    raise
                await self.session.prompt(text, streaming_behavior=behavior)
        except SessionRefused as err:
            await self.show(notice(f"The session refused the message: {err}", "red"))

    async def _reopen_if_closed(self) -> bool:
        """Continue the session from its file if it closed after waiting past its idle time
        (a file that cannot be continued is a UserError, shown as any failed command is)."""
        reopened = await reopen_if_closed(
            self.service, self.opened, self.planned.options, self.planned.registry.find
        )
        if reopened is None:
            return False
        await self.use_session(reopened, history=False)
        await self.show(notice("The session had closed while idle; it goes on from its file.", "yellow"))
        return True

    async def run_bash(self, line: str) -> None:
        private = line.startswith("!!")
        command = line[2:] if private else line[1:]
        if not command.strip():
            return
        self.bash_running = command
        self.application.invalidate()
        try:
            result = await self.session.bash(command, exclude_from_context=private)
        finally:
            self.bash_running = None
            self.clear_status(CANCELLING_TEXT)
        outcome = bash_block(
            command, result.output, result.exit_code, result.cancelled, expanded=self.display.expanded
        )
        if outcome.full_output is not None:
            self.view.last_full_output = outcome.full_output
        await self.show(outcome.block)

    def set_completion_rows(self, rows: int) -> None:
        menu = self.completions.content
        assert isinstance(menu, Window)  # CompletionsMenu wraps one window
        menu.height = Dimension(min=1, max=rows)

    def open_picker(self, picker: Picker) -> None:
        self.picker = picker
        self.application.invalidate()

    async def ask(self, message: str, placeholder: str | None = None) -> str:
        """Ask above the editor; the text of the next Enter."""
        question = Question(message, placeholder, asyncio.get_running_loop().create_future())
        self.question = question
        self.application.invalidate()
        try:
            return await question.answer
        finally:
            if self.question is question:
                self.question = None
            self.application.invalidate()

    async def run_dialog(self, work: Coroutine[Any, Any, Any]) -> bool:
        """Run `work` so that Esc (or Ctrl+C) cancels it; whether it ran to its end. Its
        errors are raised here."""
        task = asyncio.ensure_future(work)
        self.dialog = task
        try:
            await asyncio.wait({task})
        finally:
            self.dialog = None
            if not task.done():
                task.cancel()
        if task.cancelled():
            return False
        task.result()
        return True

    def _cancel_dialog(self) -> bool:
        if self.dialog is None:
            return False
        self.dialog.cancel()
        return True

    def escape(self) -> None:
        if self._cancel_dialog():
            return
        if self.bash_running is not None:
            self.spawn(self.session.abort_bash())
            self.set_status(CANCELLING_TEXT)
        elif self.view.streaming:
            self.spawn(self.restore_queue(abort=True))
            self.set_status(ABORTING_TEXT)

    async def restore_queue(self, *, abort: bool = False) -> None:
        """pi's Esc (with `abort`) and Alt+Up: the queued messages come back to the editor,
        before what is being typed, instead of being sent."""
        taken = await self.session.dequeue(abort=abort)
        self.view.steering, self.view.follow_up = [], []  # the queue_update saying so follows
        restored = len(taken.all())
        if restored:
            text = editor_text(taken, self.input.text)
            self.input.set_document(Document(text, len(text)), bypass_readonly=True)
        if not abort:
            self.set_status(
                f"Restored {restored} queued message{'s' if restored > 1 else ''} to editor"
                if restored
                else "No queued messages to restore"
            )
        self.application.invalidate()

    def ctrl_c(self) -> None:
        now = time.monotonic()
        if self.picker is not None:
            self.picker = None
            return
        if self._cancel_dialog():
            return
        if self.ctrl_c_at is not None and now - self.ctrl_c_at < CTRL_C_WINDOW_S:
            self.quit()
            return
        self.ctrl_c_at = now
        self.input.reset()
        self.set_status("Press Ctrl+C again to quit (the session is kept).")

    def quit(self) -> None:
        if self.application.is_running:
            self.application.exit()

    # --- layout -----------------------------------------------------------------------------

    def _live_text(self) -> ANSI:
        live = self.view.live(time.monotonic())
        if live is None:
            return ANSI("")
        rows = self.application.output.get_size().rows
        lines = to_ansi(live, self.width()).rstrip("\n").split("\n")
        return ANSI("\n".join(lines[-max(3, rows - RESERVED_ROWS) :]))

    def _queue_text(self) -> StyleAndTextTuples:
        out: StyleAndTextTuples = []
        for text in self.view.steering:
            out.append(("class:queue", f"↳ steering (queued): {text.splitlines()[0] if text else ''}\n"))
        for text in self.view.follow_up:
            out.append(("class:queue", f"↳ follow-up (queued): {text.splitlines()[0] if text else ''}\n"))
        return out

    def _status_text(self) -> StyleAndTextTuples:
        if self.status and time.monotonic() - self.status_at < STATUS_SHOWN_S:
            return [("class:status", self.status)]
        if self.link.lost:
            again = " · your next message starts it again" if self.link.can_restart else ""
            return [("class:status", f"no server · reconnecting…{again} · Ctrl+C twice quits")]
        if self.bash_running is not None:
            return [("class:hint", f"running !{self.bash_running} … esc cancels")]
        if self.view.streaming:
            return [("class:hint", "esc abort · enter steer · alt+enter follow-up")]
        return []

    def _build_application(self) -> Application[None]:
        picker_open = Condition(lambda: self.picker is not None)
        live = Window(FormattedTextControl(self._live_text), dont_extend_height=True, wrap_lines=False)
        queue = ConditionalContainer(
            Window(FormattedTextControl(self._queue_text), dont_extend_height=True),
            filter=Condition(lambda: bool(self.view.steering or self.view.follow_up)),
        )
        status = ConditionalContainer(
            Window(FormattedTextControl(self._status_text), height=1),
            filter=Condition(lambda: bool(self._status_text())),
        )
        picker = ConditionalContainer(
            Window(
                FormattedTextControl(lambda: self.picker.lines() if self.picker else []),
                dont_extend_height=True,
            ),
            filter=picker_open,
        )
        self.completions = CompletionsMenu(max_height=self.planned.settings.autocomplete_max_visible)
        question = ConditionalContainer(
            Window(
                FormattedTextControl(lambda: self.question.lines() if self.question else []),
                dont_extend_height=True,
            ),
            filter=Condition(lambda: self.question is not None),
        )
        editor = Window(
            BufferControl(self.input),
            get_line_prefix=lambda line, wrap: [("class:prompt", "❯ " if line == 0 and not wrap else "  ")],
            height=Dimension(min=1, max=12),
            dont_extend_height=True,
            wrap_lines=True,
        )
        footer = Window(FormattedTextControl(lambda: self.footer.lines(self.width())), height=2)
        body = HSplit(
            [
                live,
                queue,
                status,
                Window(height=1, char="─", style="class:rule"),
                picker,
                question,
                editor,
                self.completions,
                Window(height=1, char="─", style="class:rule"),
                footer,
            ]
        )
        app: Application[None] = Application(
            layout=Layout(body, focused_element=editor),
            key_bindings=self._key_bindings(picker_open),
            style=STYLE,
            full_screen=False,
            mouse_support=False,
            refresh_interval=0.1,
            erase_when_done=True,
        )
        # A lone Esc aborts; Esc+key is Alt+key. Decide quickly which one it was: a terminal
        # sends Alt+key as one write, so both keys are read together and the wait for a second
        # key (timeoutlen) only delays a lone Esc, by as much as it is long.
        app.ttimeoutlen = ESCAPE_SEQUENCE_WAIT_S
        app.timeoutlen = ALT_KEY_WAIT_S
        return app

    def _key_bindings(self, picker_open: Condition) -> KeyBindings:
        kb = KeyBindings()
        editing = ~picker_open

        @kb.add("enter", filter=editing, eager=True)
        def _enter(event: KeyPressEvent) -> None:
            state = self.input.complete_state
            if state is not None and state.current_completion is not None:
                self.input.complete_state = None  # accept the chosen completion
                return
            before = self.input.document.text_before_cursor
            if before.endswith("\\"):
                self.input.delete_before_cursor(1)
                self.input.insert_text("\n")
                return
            self.submit(follow_up=False)

        @kb.add("escape", "enter", filter=editing)
        def _alt_enter(event: KeyPressEvent) -> None:
            self.submit(follow_up=True)

        @kb.add("escape", "up", filter=editing)
        def _alt_up(event: KeyPressEvent) -> None:
            self.spawn(self.restore_queue())

        @kb.add("c-j", filter=editing)
        def _newline(event: KeyPressEvent) -> None:
            self.input.insert_text("\n")

        @kb.add("escape", filter=editing)
        def _escape(event: KeyPressEvent) -> None:
            if self.input.complete_state is not None:
                self.input.cancel_completion()
                return
            self.escape()

        @kb.add("c-c")
        def _ctrl_c(event: KeyPressEvent) -> None:
            self.ctrl_c()

        @kb.add("c-d", filter=editing)
        def _ctrl_d(event: KeyPressEvent) -> None:
            if not self.input.text:
                self.quit()
            else:
                self.input.delete()

        @kb.add("up", filter=picker_open)
        @kb.add("c-p", filter=picker_open)
        def _up(event: KeyPressEvent) -> None:
            if self.picker:
                self.picker.move(-1)

        @kb.add("down", filter=picker_open)
        @kb.add("c-n", filter=picker_open)
        def _down(event: KeyPressEvent) -> None:
            if self.picker:
                self.picker.move(1)

        @kb.add("enter", filter=picker_open, eager=True)
        def _choose(event: KeyPressEvent) -> None:
            picker, self.picker = self.picker, None
            chosen = picker.chosen() if picker else None
            if picker is not None and chosen is not None:
                self.spawn(picker.on_choose(chosen.value))

        @kb.add("escape", filter=picker_open)
        def _cancel(event: KeyPressEvent) -> None:
            self.picker = None

        @kb.add("c-s", filter=picker_open)
        def _save(event: KeyPressEvent) -> None:
            if self.picker is not None and self.picker.on_save is not None:
                self.spawn(self.picker.on_save())

        @kb.add("backspace", filter=picker_open)
        def _backspace(event: KeyPressEvent) -> None:
            if self.picker:
                self.picker.backspace()

        @kb.add(Keys.Any, filter=picker_open)
        def _type(event: KeyPressEvent) -> None:
            if self.picker and event.data.isprintable():
                self.picker.type(event.data)

        add_pi_keys(kb, self, editing)
        return kb

    # --- running ----------------------------------------------------------------------------

    async def run(
        self,
        *,
        history: bool,
        quiet: bool = False,
        prompts: tuple[list[str], list[ImageContent]] = ([], []),
    ) -> None:
        if not quiet:  # settings' quietStartup (unless --verbose), as in pi
            await self.show(
                notice(
                    "tempi · Enter sends · Alt+Enter queues a follow-up · "
                    "Esc aborts · /hotkeys for more · Ctrl+C twice quits"
                ),
                *self._loaded_resources(),
            )
        await self.use_session(self.opened, history=history)
        if prompts[0]:
            self.spawn(self.send_initial(*prompts))
        try:
            with modified_keys():
                await self.application.run_async()
        finally:
            for task in [*self.tasks, *([self.pump_task] if self.pump_task else [])]:
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
        await self._farewell()

    def _loaded_resources(self) -> list[RenderableType]:
        listed = loaded_resources(
            cwd=self.cwd,
            context_files=self.planned.context_files,
            skills=self.planned.skills,
            templates=self.planned.templates,
            extensions=self.planned.options.extensions or [],
        )
        return [listed] if listed is not None else []

    async def _farewell(self) -> None:
        if self.opened.throwaway_dir is not None:
            await self.opened.close()
            return
        working = False
        if not self.link.lost:
            with contextlib.suppress(RPCError, TimeoutError):
                working = (await asyncio.wait_for(self.session.state(), FAREWELL_WAIT_S)).is_streaming
        config = self.opened.config
        more = " It is still working; it goes on when a worker runs." if working else ""
        await self.show(
            notice(f"Session {config.session_id[:8]} is kept.{more} `tempi --continue` reopens it.")
        )


async def run_interactive(args: argparse.Namespace) -> int:
    from tempi.cli.initial_prompts import initial_prompts
    from tempi.cli.plan import check_api_key_reach, fixed_options, plan_run
    from tempi.cli.runtime import open_runtime
    from tempi.cli.sandbox_reach import check_sandbox_reach
    from tempi.cli.session_choice import choose_session, open_session, session_folder
    from tempi.cli.trust_choice import terminal_ask
    from tempi.config.paths import session_roots, tempi_home
    from tempi.config.settings_writer import remember_choice

    cwd = Path.cwd().resolve()
    prompts = initial_prompts(args, cwd, read_stdin=False)
    planned = plan_run(args, cwd, ask_trust=terminal_ask())
    store = SessionStore(*session_roots())
    choice = choose_session(store, args, planned.settings, cwd)
    folder = session_folder(choice, store, cwd)
    if folder is not None:
        check_sandbox_reach(planned.options.sandbox, cwd, folder)
    async with open_runtime(no_worker=args.no_worker) as rt:
        await check_api_key_reach(args, rt.client)
        service = SessionService(rt.client, store, remember=remember_choice)
        opened = await open_session(
            service,
            choice,
            planned.options,
            override_model=bool(args.model or args.provider),
            find_model=planned.registry.find,
            fixed=fixed_options(args),
        )
        app = InteractiveApp(service, planned, opened, cwd, choice.session_dir)
        app.args = args
        app.link = link_for(rt.embedded)
        app.mark = ClientMark(tempi_home(), "interactive")
        try:
            await app.run(
                history=choice.existing is not None,
                quiet=planned.settings.quiet_startup and not args.verbose,
                prompts=prompts,
            )
        finally:
            app.mark.clear()
    return 0
