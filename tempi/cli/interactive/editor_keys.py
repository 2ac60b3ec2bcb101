"""The keys of the editor and of an open picker: sending, queueing, aborting, quitting, and
choosing in a picker. pi's application keys are added to them from key_bindings.py."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys

from tempi.cli.interactive.key_bindings import add_pi_keys
from tempi.cli.interactive.sending import submit
from tempi.cli.interactive.status_line import ABORTING_TEXT, CANCELLING_TEXT
from tempi.cli.queued_messages import editor_text

if TYPE_CHECKING:
    from tempi.cli.interactive.app import InteractiveApp

CTRL_C_WINDOW_S = 2.0


def escape(app: InteractiveApp) -> None:
    if app.cancel_dialog():
        return
    if app.bash_running is not None:
        app.spawn(app.session.abort_bash())
        app.set_status(CANCELLING_TEXT)
    elif app.view.streaming:
        app.spawn(restore_queue(app, abort=True))
        app.set_status(ABORTING_TEXT)


async def restore_queue(app: InteractiveApp, *, abort: bool = False) -> None:
    """pi's Esc (with `abort`) and Alt+Up: the queued messages come back to the editor,
    before what is being typed, instead of being sent."""
    taken = await app.session.dequeue(abort=abort)
    app.view.steering, app.view.follow_up = [], []  # the queue_update saying so follows
    restored = len(taken.all())
    if restored:
        text = editor_text(taken, app.input.text)
        app.input.set_document(Document(text, len(text)), bypass_readonly=True)
    if not abort:
        app.set_status(
            f"Restored {restored} queued message{'s' if restored > 1 else ''} to editor"
            if restored
            else "No queued messages to restore"
        )
    app.application.invalidate()


def ctrl_c(app: InteractiveApp) -> None:
    now = time.monotonic()
    if app.picker is not None:
        app.picker = None
        return
    if app.cancel_dialog():
        return
    if app.ctrl_c_at is not None and now - app.ctrl_c_at < CTRL_C_WINDOW_S:
        app.quit()
        return
    app.ctrl_c_at = now
    app.input.reset()
    app.set_status("Press Ctrl+C again to quit (the session is kept).")


def editor_key_bindings(app: InteractiveApp, picker_open: Condition) -> KeyBindings:
    kb = KeyBindings()
    editing = ~picker_open

    @kb.add("enter", filter=editing, eager=True)
    def _enter(event: KeyPressEvent) -> None:
        state = app.input.complete_state
        if state is not None and state.current_completion is not None:
            app.input.complete_state = None  # accept the chosen completion
            return
        before = app.input.document.text_before_cursor
        if before.endswith("\\"):
            app.input.delete_before_cursor(1)
            app.input.insert_text("\n")
            return
        submit(app, follow_up=False)

    @kb.add("escape", "enter", filter=editing)
    def _alt_enter(event: KeyPressEvent) -> None:
        submit(app, follow_up=True)

    @kb.add("escape", "up", filter=editing)
    def _alt_up(event: KeyPressEvent) -> None:
        app.spawn(restore_queue(app))

    @kb.add("c-j", filter=editing)
    def _newline(event: KeyPressEvent) -> None:
        app.input.insert_text("\n")

    @kb.add("escape", filter=editing)
    def _escape(event: KeyPressEvent) -> None:
        if app.input.complete_state is not None:
            app.input.cancel_completion()
            return
        escape(app)

    @kb.add("c-c")
    def _ctrl_c(event: KeyPressEvent) -> None:
        ctrl_c(app)

    @kb.add("c-d", filter=editing)
    def _ctrl_d(event: KeyPressEvent) -> None:
        if not app.input.text:
            app.quit()
        else:
            app.input.delete()

    @kb.add("up", filter=picker_open)
    @kb.add("c-p", filter=picker_open)
    def _up(event: KeyPressEvent) -> None:
        if app.picker:
            app.picker.move(-1)

    @kb.add("down", filter=picker_open)
    @kb.add("c-n", filter=picker_open)
    def _down(event: KeyPressEvent) -> None:
        if app.picker:
            app.picker.move(1)

    @kb.add("enter", filter=picker_open, eager=True)
    def _choose(event: KeyPressEvent) -> None:
        picker, app.picker = app.picker, None
        chosen = picker.chosen() if picker else None
        if picker is not None and chosen is not None:
            app.spawn(picker.on_choose(chosen.value))

    @kb.add("escape", filter=picker_open)
    def _cancel(event: KeyPressEvent) -> None:
        app.picker = None

    @kb.add("c-s", filter=picker_open)
    def _save(event: KeyPressEvent) -> None:
        if app.picker is not None and app.picker.on_save is not None:
            app.spawn(app.picker.on_save())

    @kb.add("backspace", filter=picker_open)
    def _backspace(event: KeyPressEvent) -> None:
        if app.picker:
            app.picker.backspace()

    @kb.add(Keys.Any, filter=picker_open)
    def _type(event: KeyPressEvent) -> None:
        if app.picker and event.data.isprintable():
            app.picker.type(event.data)

    add_pi_keys(kb, app, editing)
    return kb
