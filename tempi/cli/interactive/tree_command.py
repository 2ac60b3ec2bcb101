"""pi's /tree: choose an entry in the tree selector, answer "Summarize branch?", and the
session continues from there with the transcript drawn again for the new branch."""

from __future__ import annotations

import shutil
from typing import Any, Protocol

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.formatted_text import StyleAndTextTuples
from rich.console import RenderableType

from tempi.agent.session_entries import MessageEntry
from tempi.cli.interactive.picker import Picker, PickerItem
from tempi.cli.interactive.redraw import Redrawable, redraw
from tempi.cli.interactive.render import notice
from tempi.cli.interactive.tree_view import TreeView
from tempi.client import SessionClient, SessionRefused, SessionService
from tempi.client.transcript import load_at_leaf, user_text
from tempi.store.loading import LoadedSession

NO_SUMMARY, SUMMARIZE, CUSTOM = "No summary", "Summarize", "Summarize with custom prompt"


class TreeHost(Redrawable, Protocol):
    service: SessionService
    input: Buffer

    @property
    def session(self) -> SessionClient: ...

    async def show(self, *blocks: RenderableType) -> None: ...

    def open_picker(self, picker: Picker) -> None: ...


class TreePicker(Picker):
    """The tree selector where the app shows pickers: the same keys (arrows, typing,
    Enter, Esc) plus folding, which key_bindings adds while a TreePicker is open."""

    def __init__(self, view: TreeView, on_choose: Any) -> None:
        super().__init__("Session Tree", [], on_choose)
        self.view = view

    def type(self, text: str) -> None:
        self.view.type(text)

    def backspace(self) -> None:
        self.view.backspace()

    def move(self, step: int) -> None:
        self.view.move(step)

    def chosen(self) -> PickerItem | None:
        selected = self.view.selected_id()
        return PickerItem(selected, selected) if selected is not None else None

    def lines(self) -> StyleAndTextTuples:
        return self.view.lines()


class TextQuestion(Picker):
    """A line of free text in place of the editor (pi's custom summarization prompt)."""

    def chosen(self) -> PickerItem | None:
        text = self.query.strip()
        return PickerItem(text, text) if text else None

    def lines(self) -> StyleAndTextTuples:
        return [
            ("class:picker.title", f"{self.title}\n"),
            ("", f"  > {self.query}\n"),
            ("class:picker.hint", "  (enter to summarize, esc to go back)\n"),
        ]


async def open_tree(app: TreeHost, selected_id: str | None = None) -> None:
    state = await app.session.state()
    loaded, leaf = await load_at_leaf(app.service.store, state.session_file, state.leaf_id)
    if loaded is None or not len(loaded.tree):
        await app.show(notice("No entries in session"))
        return
    rows = shutil.get_terminal_size().lines
    view = TreeView(loaded.tree, leaf, max_lines=rows // 2, selected_id=selected_id)

    async def chosen(entry_id: str) -> None:
        if entry_id == leaf:
            await app.show(notice("Already at this point"))
            return
        await ask_summary(app, loaded, entry_id)

    app.open_picker(TreePicker(view, chosen))


async def ask_summary(app: TreeHost, loaded: LoadedSession, entry_id: str) -> None:
    """pi's question before leaving a branch; Esc goes back to the tree."""

    async def answer(choice: str) -> None:
        if choice == CUSTOM:
            app.open_picker(
                TextQuestion(
                    "Custom summarization instructions",
                    [],
                    lambda text: navigate(app, loaded, entry_id, summarize=True, instructions=text),
                    on_cancel=lambda: ask_summary(app, loaded, entry_id),
                )
            )
            return
        await navigate(app, loaded, entry_id, summarize=choice == SUMMARIZE, instructions=None)

    items = [PickerItem(choice, choice) for choice in (NO_SUMMARY, SUMMARIZE, CUSTOM)]
    app.open_picker(Picker("Summarize branch?", items, answer, on_cancel=lambda: open_tree(app, entry_id)))


async def navigate(
    app: TreeHost, loaded: LoadedSession, entry_id: str, *, summarize: bool, instructions: str | None
) -> None:
    entry = loaded.tree.get(entry_id)
    # Choosing a user message re-edits it: continue from its parent, its text in the editor.
    user_entry = entry if isinstance(entry, MessageEntry) and entry.message.role == "user" else None
    new_leaf = user_entry.parent_id if user_entry is not None else entry_id
    if summarize:
        await app.show(notice("Summarizing branch..."))
    try:
        await app.session.navigate(entry_id, new_leaf, summarize=summarize, custom_instructions=instructions)
    except SessionRefused as err:
        await app.show(notice(f"Could not move there: {err}", "red"))
        return
    await redraw(app)
    if user_entry is not None and not app.input.text.strip():
        text = user_text(user_entry.message.to_json_dict())
        app.input.text = text
        app.input.cursor_position = len(text)
    await app.show(notice("Navigated to selected point"))
