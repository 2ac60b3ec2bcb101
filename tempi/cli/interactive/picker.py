"""A list to choose from in place of the editor: type to filter, arrows to move, Enter to pick."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from prompt_toolkit.formatted_text import StyleAndTextTuples

VISIBLE_ROWS = 10


@dataclass
class PickerItem:
    label: str
    value: Any
    detail: str = ""


@dataclass
class Picker:
    title: str
    items: list[PickerItem]
    on_choose: Callable[[Any], Awaitable[None]]
    query: str = ""
    index: int = 0
    _matches: list[PickerItem] = field(default_factory=list)
    # What Esc leads back to (pi's "Summarize branch?" returns to the tree); None: nothing.
    on_cancel: Callable[[], Awaitable[None]] | None = None
    # What Ctrl+S does (pi's /scoped-models saves its choice); None: nothing.
    on_save: Callable[[], Awaitable[None]] | None = None

    def __post_init__(self) -> None:
        self._filter()

    def _filter(self) -> None:
        words = self.query.lower().split()
        self._matches = [
            item for item in self.items if all(w in f"{item.label} {item.detail}".lower() for w in words)
        ]
        self.index = min(self.index, max(0, len(self._matches) - 1))

    def type(self, text: str) -> None:
        self.query += text
        self.index = 0
        self._filter()

    def backspace(self) -> None:
        self.query = self.query[:-1]
        self._filter()

    def move(self, step: int) -> None:
        if self._matches:
            self.index = (self.index + step) % len(self._matches)

    def chosen(self) -> PickerItem | None:
        return self._matches[self.index] if self._matches else None

    def lines(self) -> StyleAndTextTuples:
        out: StyleAndTextTuples = [
            ("class:picker.title", f"{self.title}  "),
            ("class:picker.hint", "(type to filter, ↑↓ move, enter choose, esc cancel)\n"),
            ("", f"  filter: {self.query}\n"),
        ]
        if not self._matches:
            out.append(("class:picker.hint", "  nothing matches\n"))
            return out
        start = max(0, min(self.index - VISIBLE_ROWS // 2, len(self._matches) - VISIBLE_ROWS))
        for i, item in enumerate(self._matches[start : start + VISIBLE_ROWS], start):
            selected = i == self.index
            out.append(
                ("class:picker.selected" if selected else "", f"{'›' if selected else ' '} {item.label}")
            )
            if item.detail:
                out.append(("class:picker.hint", f"  {item.detail}"))
            out.append(("", "\n"))
        if len(self._matches) > VISIBLE_ROWS:
            out.append(("class:picker.hint", f"  {len(self._matches)} in all\n"))
        return out
