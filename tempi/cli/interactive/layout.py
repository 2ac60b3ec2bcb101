"""The application's few bottom lines, under the scrollback: what is still changing (the
streaming answer, running tools), the queue, the status, a picker or a question, the
editor and its completions, and the footer."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prompt_toolkit.application import Application
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import ANSI, StyleAndTextTuples
from prompt_toolkit.layout import (
    ConditionalContainer,
    Dimension,
    FormattedTextControl,
    HSplit,
    Layout,
    Window,
)
from prompt_toolkit.layout.controls import BufferControl
from prompt_toolkit.styles import Style

from tempi.cli.interactive.editor_keys import editor_key_bindings
from tempi.cli.interactive.render import to_ansi
from tempi.cli.interactive.status_line import status_text

if TYPE_CHECKING:
    from tempi.cli.interactive.app import InteractiveApp

ALT_KEY_WAIT_S = 0.01
# How long a lone Esc byte waits for the rest of an escape sequence (which a terminal sends
# in one write): this much of every abort by Esc.
ESCAPE_SEQUENCE_WAIT_S = 0.03
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


def _live_text(app: InteractiveApp) -> ANSI:
    live = app.view.live(time.monotonic())
    if live is None:
        return ANSI("")
    rows = app.application.output.get_size().rows
    lines = to_ansi(live, app.width()).rstrip("\n").split("\n")
    return ANSI("\n".join(lines[-max(3, rows - RESERVED_ROWS) :]))


def _queue_text(app: InteractiveApp) -> StyleAndTextTuples:
    out: StyleAndTextTuples = []
    for text in app.view.steering:
        out.append(("class:queue", f"↳ steering (queued): {text.splitlines()[0] if text else ''}\n"))
    for text in app.view.follow_up:
        out.append(("class:queue", f"↳ follow-up (queued): {text.splitlines()[0] if text else ''}\n"))
    return out


def build_application(app: InteractiveApp) -> Application[None]:
    picker_open = Condition(lambda: app.picker is not None)
    live = Window(FormattedTextControl(lambda: _live_text(app)), dont_extend_height=True, wrap_lines=False)
    queue = ConditionalContainer(
        Window(FormattedTextControl(lambda: _queue_text(app)), dont_extend_height=True),
        filter=Condition(lambda: bool(app.view.steering or app.view.follow_up)),
    )
    status = ConditionalContainer(
        Window(FormattedTextControl(lambda: status_text(app)), height=1),
        filter=Condition(lambda: bool(status_text(app))),
    )
    picker = ConditionalContainer(
        Window(
            FormattedTextControl(lambda: app.picker.lines() if app.picker else []),
            dont_extend_height=True,
        ),
        filter=picker_open,
    )
    question = ConditionalContainer(
        Window(
            FormattedTextControl(lambda: app.question.lines() if app.question else []),
            dont_extend_height=True,
        ),
        filter=Condition(lambda: app.question is not None),
    )
    editor = Window(
        BufferControl(app.input),
        get_line_prefix=lambda line, wrap: [("class:prompt", "❯ " if line == 0 and not wrap else "  ")],
        height=Dimension(min=1, max=12),
        dont_extend_height=True,
        wrap_lines=True,
    )
    footer = Window(FormattedTextControl(lambda: app.footer.lines(app.width())), height=2)
    body = HSplit(
        [
            live,
            queue,
            status,
            Window(height=1, char="─", style="class:rule"),
            picker,
            question,
            editor,
            app.completions,
            Window(height=1, char="─", style="class:rule"),
            footer,
        ]
    )
    application: Application[None] = Application(
        layout=Layout(body, focused_element=editor),
        key_bindings=editor_key_bindings(app, picker_open),
        style=STYLE,
        full_screen=False,
        mouse_support=False,
        refresh_interval=0.1,
        erase_when_done=True,
    )
    # A lone Esc aborts; Esc+key is Alt+key. Decide quickly which one it was: a terminal
    # sends Alt+key as one write, so both keys are read together and the wait for a second
    # key (timeoutlen) only delays a lone Esc, by as much as it is long.
    application.ttimeoutlen = ESCAPE_SEQUENCE_WAIT_S
    application.timeoutlen = ALT_KEY_WAIT_S
    return application
