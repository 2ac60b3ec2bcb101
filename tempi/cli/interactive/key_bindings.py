"""pi's application keys (its `app.*` keybindings) on the interactive editor: cycling models
and thinking levels, the model picker, expanding tool output, showing thinking, Shift+Enter,
the external editor, pasting an image and suspending."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from prompt_toolkit.filters import Condition, Filter
from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys

from tempi.agent.thinking_levels import DEFAULT_THINKING_LEVEL
from tempi.cli.interactive import commands, terminal_handoff
from tempi.cli.interactive.key_host import KeyHost
from tempi.cli.interactive.redraw import redraw
from tempi.cli.interactive.render import notice
from tempi.cli.interactive.tree_command import TreePicker

# prompt_toolkit has no key for Ctrl+Shift+P; an F-key no keyboard sends stands in for it.
CTRL_SHIFT_P = Keys.F24

# Terminals report modified keys as CSI-u (kitty, tmux with extended-keys) or as xterm's
# modifyOtherKeys; prompt_toolkit knows neither for these keys.
_MODIFIED_KEYS: dict[str, Keys | tuple[Keys, ...]] = {
    "\x1b[13;2u": Keys.ControlJ,  # Shift+Enter: a new line
    "\x1b[27;2;13~": Keys.ControlJ,
    "\x1b[13;3u": (Keys.Escape, Keys.ControlM),  # Alt+Enter stays a follow-up
    "\x1b[27;3;13~": (Keys.Escape, Keys.ControlM),
    "\x1b[80;6u": CTRL_SHIFT_P,
    "\x1b[112;6u": CTRL_SHIFT_P,
    "\x1b[27;6;80~": CTRL_SHIFT_P,
    "\x1b[27;6;112~": CTRL_SHIFT_P,
}
ANSI_SEQUENCES.update(_MODIFIED_KEYS)

# xterm's modifyOtherKeys mode 1: keys with a well-known code keep it (so Ctrl+C is still
# Ctrl+C), while Shift+Enter and Ctrl+Shift+P arrive distinguishable, as pi asks for.
_ASK_MODIFIED_KEYS = "\x1b[>4;1m"
_STOP_MODIFIED_KEYS = "\x1b[>4;0m"


@contextlib.contextmanager
def modified_keys() -> Iterator[None]:
    """While the editor runs, ask the terminal to tell Shift+Enter from Enter."""
    if not sys.stdout.isatty():
        yield
        return
    sys.stdout.write(_ASK_MODIFIED_KEYS)
    sys.stdout.flush()
    try:
        yield
    finally:
        sys.stdout.write(_STOP_MODIFIED_KEYS)
        sys.stdout.flush()


# --- the actions ------------------------------------------------------------------------------


async def cycle_model(app: KeyHost, *, backward: bool = False) -> None:
    models = commands.cycled_models(app)
    default_level = app.planned.settings.default_thinking_level or DEFAULT_THINKING_LEVEL
    result = await app.session.cycle_model(models[::-1] if backward else models, default_level=default_level)
    if result is None:
        await app.show(notice("Only one model available"))
        return
    model, level = result
    app.planned.options.model, app.planned.options.thinking_level = model, level
    await app.refresh_footer()
    thinking = f" (thinking: {level})" if model.reasoning and level != "off" else ""
    await app.show(notice(f"Switched to {model.name or model.id}{thinking}"))


async def cycle_thinking_level(app: KeyHost) -> None:
    level = await app.session.cycle_thinking_level()
    if level is None:
        await app.show(notice("Current model does not support thinking"))
        return
    app.planned.options.thinking_level = level
    await app.refresh_footer()
    await app.show(notice(f"Thinking level: {level}"))


async def toggle_tool_output(app: KeyHost) -> None:
    app.display.expanded = not app.display.expanded
    await redraw(app)


async def toggle_thinking_blocks(app: KeyHost) -> None:
    app.display.hide_thinking = not app.display.hide_thinking
    await redraw(app)
    await app.show(notice(f"Thinking blocks: {'hidden' if app.display.hide_thinking else 'visible'}"))


# --- the bindings ------------------------------------------------------------------------------


def add_pi_keys(kb: KeyBindings, app: KeyHost, editing: Filter) -> None:
    """Bind pi's application keys while the editor (not a picker) has the keyboard, and the
    tree selector's own keys while it is open. Added after the app's own bindings, so that
    for the same key these win."""
    add_tree_keys(kb, app)

    @kb.add("c-p", filter=editing)
    def _next_model(event: KeyPressEvent) -> None:
        app.spawn(cycle_model(app))

    @kb.add(CTRL_SHIFT_P, filter=editing)
    def _previous_model(event: KeyPressEvent) -> None:
        app.spawn(cycle_model(app, backward=True))

    @kb.add("s-tab", filter=editing)
    def _thinking_level(event: KeyPressEvent) -> None:
        app.spawn(cycle_thinking_level(app))

    @kb.add("c-l", filter=editing)
    def _model_picker(event: KeyPressEvent) -> None:
        app.spawn(commands.cmd_model(app, ""))

    @kb.add("c-o", filter=editing)
    def _tool_output(event: KeyPressEvent) -> None:
        app.spawn(toggle_tool_output(app))

    @kb.add("c-t", filter=editing)
    def _thinking_blocks(event: KeyPressEvent) -> None:
        app.spawn(toggle_thinking_blocks(app))

    @kb.add("c-g", filter=editing)
    def _external_editor(event: KeyPressEvent) -> None:
        app.spawn(terminal_handoff.edit_externally(app))

    @kb.add("c-v", filter=editing)
    def _paste_image(event: KeyPressEvent) -> None:
        app.spawn(terminal_handoff.paste_image(app))

    @kb.add("c-z", filter=editing)
    def _suspend(event: KeyPressEvent) -> None:
        event.app.suspend_to_background()


def add_tree_keys(kb: KeyBindings, app: KeyHost) -> None:
    picker_open = Condition(lambda: app.picker is not None)
    tree_open = Condition(lambda: isinstance(app.picker, TreePicker))

    def tree() -> TreePicker:
        assert isinstance(app.picker, TreePicker)
        return app.picker

    @kb.add("c-left", filter=tree_open)
    @kb.add("escape", "left", filter=tree_open)
    def _fold(event: KeyPressEvent) -> None:
        tree().view.fold_or_up()

    @kb.add("c-right", filter=tree_open)
    @kb.add("escape", "right", filter=tree_open)
    def _unfold(event: KeyPressEvent) -> None:
        tree().view.unfold_or_down()

    @kb.add("left", filter=tree_open)
    @kb.add("pageup", filter=tree_open)
    def _page_up(event: KeyPressEvent) -> None:
        tree().view.page(-1)

    @kb.add("right", filter=tree_open)
    @kb.add("pagedown", filter=tree_open)
    def _page_down(event: KeyPressEvent) -> None:
        tree().view.page(1)

    @kb.add("escape", filter=picker_open)
    def _cancel(event: KeyPressEvent) -> None:
        picker = app.picker
        if isinstance(picker, TreePicker) and picker.view.clear_query():
            return
        app.picker = None
        if picker is not None and picker.on_cancel is not None:
            app.spawn(picker.on_cancel())
