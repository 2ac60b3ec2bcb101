"""Issue 42: Ctrl+G's temporary file for $EDITOR lives in the shared temp directory, so it
must be private and must not be a name another user could plant a link at beforehand."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit.buffer import Buffer

from tempi.cli.interactive.terminal_handoff import edit_externally


class _App:
    def __init__(self, text: str) -> None:
        self.input = Buffer()
        self.input.text = text
        self.shown: list[Any] = []

    async def show(self, item: Any) -> None:
        self.shown.append(item)


async def test_the_editor_gets_a_private_file_no_planted_link_can_redirect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("the owner's file\n")
    # Another user's links at every name the old scheme (milliseconds since the epoch) could pick.
    now = int(time.time() * 1000)
    for ms in range(now - 100, now + 5000):
        (shared / f"tempi-editor-{ms}.md").symlink_to(victim)
    seen = tmp_path / "seen"
    editor = tmp_path / "editor"
    editor.write_text(f'#!/bin/sh\nstat -c %a "$1" > {seen}\nprintf " and more" >> "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again

    app = _App("draft")
    await edit_externally(app)  # type: ignore[arg-type]

    assert app.input.text == "draft and more"
    assert victim.read_text() == "the owner's file\n"
    assert seen.read_text().strip() == "600"
    # Nothing of the draft is left behind in the shared directory.
    left = [p for p in shared.iterdir() if not p.is_symlink()]
    assert left == []
