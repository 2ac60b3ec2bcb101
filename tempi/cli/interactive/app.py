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
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.layout import Dimension, Window
from prompt_toolkit.layout.menus import CompletionsMenu
from rich.console import RenderableType
from temporalio.service import RPCError

from tempi.agent.messages import ImageContent
from tempi.agent.skills import Skill
from tempi.cli import slash_input
from tempi.cli.git_branch import git_branch
from tempi.cli.interactive import commands
from tempi.cli.interactive.footer import FooterInfo, answers_in
from tempi.cli.interactive.input_editor import InputCompleter, build_input_buffer, history_for
from tempi.cli.interactive.key_bindings import modified_keys
from tempi.cli.interactive.layout import build_application
from tempi.cli.interactive.picker import Picker
from tempi.cli.interactive.render import Display, LiveView, notice, to_ansi
from tempi.cli.interactive.sending import send_initial
from tempi.cli.interactive.session_stream import pump, show_history
from tempi.cli.interactive.startup_header import loaded_resources
from tempi.cli.open_clients import ClientMark
from tempi.cli.plan import PlannedRun
from tempi.cli.server_link import ServerLink, link_for
from tempi.cli.session_choice import OpenSession
from tempi.client import EventFollower, SessionClient, SessionService
from tempi.client.transcript import context_messages, context_usage, load_at_leaf
from tempi.store.session_store import SessionStore

# How long leaving may wait for the server to say whether the session is still working.
FAREWELL_WAIT_S = 3.0


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
        self.completions = CompletionsMenu(max_height=planned.settings.autocomplete_max_visible)
        self.application: Application[None] = build_application(self)

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
        start = await show_history(self) if history else None
        # Subagents' own events stay out of the transcript: their `task` call shows them.
        follower = opened.session.follow(from_offset=start or 0, subagents=False)
        if start is None:
            await follower.skip_to_end()
        self.follower = follower
        self.pump_task = asyncio.create_task(pump(self))
        self.spawn(self.refresh_footer())

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

    # --- pickers and dialogs ----------------------------------------------------------------

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

    def cancel_dialog(self) -> bool:
        if self.dialog is None:
            return False
        self.dialog.cancel()
        return True

    def quit(self) -> None:
        if self.application.is_running:
            self.application.exit()

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
            self.spawn(send_initial(self, *prompts))
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
