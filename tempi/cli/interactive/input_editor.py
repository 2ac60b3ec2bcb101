"""The input editor: a multi-line buffer with persistent history, Emacs keys (prompt_toolkit's
defaults) and completion of slash commands and @file paths."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory

from tempi.config.paths import tempi_home

HISTORY_FILE = "prompt-history"
MAX_FILE_COMPLETIONS = 50


def history_for(home: Path | None = None) -> History:
    """Prompts typed in any session, kept under $TEMPI_HOME (in memory if it is not writable)."""
    path = (home or tempi_home()) / HISTORY_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    except OSError:
        return InMemoryHistory()
    return FileHistory(str(path))


class InputCompleter(Completer):
    """`/name` at the start of the input completes commands; `@path` anywhere completes files."""

    def __init__(self, commands: Callable[[], list[tuple[str, str]]], cwd: Path) -> None:
        self.commands = commands
        self.cwd = cwd

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and " " not in before and "\n" not in before:
            typed = before[1:]
            for name, summary in self.commands():
                if name.startswith(typed):
                    yield Completion(f"/{name}", start_position=-len(before), display_meta=summary)
            return
        word = before.split()[-1] if before and not before[-1].isspace() else ""
        if word.startswith("@"):
            yield from self._files(word[1:])

    def _files(self, typed: str) -> Iterable[Completion]:
        folder, _, prefix = typed.rpartition("/")
        base = (self.cwd / folder) if folder else self.cwd
        try:
            names = sorted(os.listdir(base))
        except OSError:
            return
        shown = 0
        for name in names:
            if not name.startswith(prefix) or (name.startswith(".") and not prefix.startswith(".")):
                continue
            is_dir = (base / name).is_dir()
            path = f"{folder}/{name}" if folder else name
            yield Completion(
                f"@{path}{'/' if is_dir else ''}",
                start_position=-(len(typed) + 1),
                display=f"{name}{'/' if is_dir else ''}",
            )
            shown += 1
            if shown >= MAX_FILE_COMPLETIONS:
                return


def build_input_buffer(completer: Completer, history: History) -> Buffer:
    return Buffer(
        multiline=True,
        history=history,
        completer=completer,
        complete_while_typing=True,
        name="input",
    )
