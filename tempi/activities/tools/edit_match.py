"""Finding each edit's oldText in a file and splicing in the replacements.

Matching happens on a normalised view of the file, and every character of a view
remembers which characters of the original it came from. A match found in a view is
mapped back to the original text, so everything outside the matched regions keeps its
exact bytes: line endings (CRLF, lone CR, mixed), smart quotes, trailing spaces.

Two views: line endings folded to LF (what the model sees when it reads), and a fuzzy
one that also drops trailing whitespace per line and folds typographic quotes, dashes,
odd spaces and Unicode compatibility forms (NFKC) to plain ASCII-ish text. The fuzzy
view is only consulted when the LF view has no match.
"""

from __future__ import annotations

import itertools
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from tempi.activities.tools.errors import ToolError

_FOLDS = {
    **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " "),
}


@dataclass(frozen=True)
class Edit:
    old_text: str
    new_text: str


@dataclass(frozen=True)
class MappedText:
    """A normalised view of a text; `starts`/`ends` give each character's source span in
    the original (None: the view is the original)."""

    text: str
    starts: list[int] | None = None
    ends: list[int] | None = None

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        if self.starts is None or self.ends is None:
            return start, end
        return self.starts[start], self.ends[end - 1]


def to_lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def lf_view(original: str) -> MappedText:
    if "\r" not in original:
        return MappedText(original)
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    index = 0
    while index < len(original):
        char = original[index]
        width = 2 if char == "\r" and original.startswith("\n", index + 1) else 1
        chars.append("\n" if char == "\r" else char)
        starts.append(index)
        ends.append(index + width)
        index += width
    return MappedText("".join(chars), starts, ends)


def _fold(char: str) -> str:
    if char < "\u0080":
        return char
    folded = _FOLDS.get(char)
    if folded is not None:
        return folded
    return unicodedata.normalize("NFKC", char)


def fuzzy_view(view: MappedText) -> MappedText:
    """The fuzzy view, built on top of an LF view."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []

    def source(position: int) -> tuple[int, int]:
        if view.starts is None or view.ends is None:
            return position, position + 1
        return view.starts[position], view.ends[position]

    position = 0
    lines = view.text.split("\n")
    for line_number, line in enumerate(lines):
        for offset, char in enumerate(line.rstrip()):
            start, end = source(position + offset)
            for folded in _fold(char):
                chars.append(folded)
                starts.append(start)
                ends.append(end)
        position += len(line)
        if line_number < len(lines) - 1:
            start, end = source(position)
            chars.append("\n")
            starts.append(start)
            ends.append(end)
            position += 1
    return MappedText("".join(chars), starts, ends)


def fuzzy_text(text: str) -> str:
    return fuzzy_view(MappedText(to_lf(text))).text


def _edit_label(index: int, count: int) -> str:
    return "oldText" if count == 1 else f"edits[{index}].oldText"


def _find_once(view: MappedText, needle: str) -> tuple[int, int] | int:
    """The original span of the single occurrence of `needle`, or how many there are (0 or >1)."""
    occurrences = view.text.count(needle)
    if occurrences != 1:
        return occurrences
    start = view.text.find(needle)
    return view.original_span(start, start + len(needle))


def locate_edits(original: str, edits: Sequence[Edit], display_path: str) -> list[tuple[int, int]]:
    """The original span each edit replaces; raises ToolError naming the edit that fails."""
    lf = lf_view(original)
    fuzzy: MappedText | None = None
    spans: list[tuple[int, int]] = []
    for index, edit in enumerate(edits):
        label = _edit_label(index, len(edits))
        needle = to_lf(edit.old_text)
        if not needle:
            raise ToolError(f"{label} is empty; it must contain the text to replace in {display_path}")
        found = _find_once(lf, needle)
        if found == 0:
            fuzzy = fuzzy or fuzzy_view(lf)
            fuzzy_needle = fuzzy_text(needle)
            found = _find_once(fuzzy, fuzzy_needle) if fuzzy_needle else 0
        if isinstance(found, tuple):
            spans.append(found)
        elif found == 0:
            raise ToolError(
                f"Could not find {label} in {display_path}. It must match the file exactly, including "
                "whitespace and line breaks; read the file again to get its current text."
            )
        else:
            raise ToolError(
                f"{label} occurs {found} times in {display_path}; it must match exactly one place. "
                "Include more surrounding lines to make it unique."
            )
    order = sorted(range(len(spans)), key=lambda i: spans[i])
    for before, after in itertools.pairwise(order):
        if spans[after][0] < spans[before][1]:
            first, second = sorted((before, after))
            raise ToolError(
                f"edits[{first}] and edits[{second}] overlap in {display_path}. "
                "Merge them into one edit, or make them target separate regions."
            )
    return spans


def detect_line_ending(text: str) -> str:
    """The ending of the first line: CRLF files get CRLF in inserted text."""
    newline = text.find("\n")
    return "\r\n" if newline > 0 and text[newline - 1] == "\r" else "\n"


def apply_edits(original: str, edits: Sequence[Edit], display_path: str) -> str:
    """The file text with every edit applied, all matched against `original`."""
    spans = locate_edits(original, edits, display_path)
    ending = detect_line_ending(original)
    replaced = sorted(zip(spans, edits, strict=True), key=lambda pair: pair[0][0])
    pieces: list[str] = []
    cursor = 0
    for (start, end), edit in replaced:
        pieces.append(original[cursor:start])
        new_text = to_lf(edit.new_text)
        pieces.append(new_text.replace("\n", ending) if ending != "\n" else new_text)
        cursor = end
    pieces.append(original[cursor:])
    return "".join(pieces)
