"""The line diff shown for an edit, in pi's layout.

Each line is a marker (`-` removed, `+` added, ` ` context), the line number padded to
a common width (old numbers for removed and context lines, new numbers for added lines),
a space, then the text. Up to four context lines surround each change; longer unchanged
stretches are elided with `...`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

CONTEXT_LINES = 4


@dataclass(frozen=True)
class EditDiff:
    diff: str
    first_changed_line: int | None  # in the new file, 1-based


@dataclass(frozen=True)
class _Block:
    kind: str  # "equal" | "removed" | "added"
    lines: list[str]


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def _blocks(old_lines: list[str], new_lines: list[str]) -> list[_Block]:
    blocks: list[_Block] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        if tag == "equal":
            blocks.append(_Block("equal", old_lines[old_start:old_end]))
            continue
        if old_end > old_start:
            blocks.append(_Block("removed", old_lines[old_start:old_end]))
        if new_end > new_start:
            blocks.append(_Block("added", new_lines[new_start:new_end]))
    return blocks


def render_diff(old_text: str, new_text: str) -> EditDiff:
    """Diff of two LF texts."""
    width = len(str(max(old_text.count("\n"), new_text.count("\n")) + 1))
    blocks = _blocks(_lines(old_text), _lines(new_text))
    output: list[str] = []
    old_number = new_number = 1
    first_changed: int | None = None
    elision = f" {'':>{width}} ..."
    for position, block in enumerate(blocks):
        if block.kind == "removed":
            first_changed = first_changed or new_number
            for line in block.lines:
                output.append(f"-{old_number:>{width}} {line}")
                old_number += 1
            continue
        if block.kind == "added":
            first_changed = first_changed or new_number
            for line in block.lines:
                output.append(f"+{new_number:>{width}} {line}")
                new_number += 1
            continue
        after_change = position > 0
        before_change = position < len(blocks) - 1
        shown = block.lines
        skipped_start = skipped_end = 0
        if not after_change:
            skipped_start = max(0, len(shown) - CONTEXT_LINES)
            shown = shown[skipped_start:]
        if not before_change and len(shown) > CONTEXT_LINES:
            skipped_end = len(shown) - CONTEXT_LINES
            shown = shown[:CONTEXT_LINES]
        if after_change and before_change and len(shown) > 2 * CONTEXT_LINES:
            # A long unchanged stretch between two changes: keep context on both sides.
            skipped_middle = len(shown) - 2 * CONTEXT_LINES
            for line in shown[:CONTEXT_LINES]:
                output.append(f" {old_number:>{width}} {line}")
                old_number += 1
                new_number += 1
            output.append(elision)
            old_number += skipped_middle
            new_number += skipped_middle
            shown = shown[-CONTEXT_LINES:]
        if skipped_start:
            output.append(elision)
            old_number += skipped_start
            new_number += skipped_start
        for line in shown:
            output.append(f" {old_number:>{width}} {line}")
            old_number += 1
            new_number += 1
        if skipped_end:
            output.append(elision)
            old_number += skipped_end
            new_number += skipped_end
    return EditDiff("\n".join(output), first_changed)
