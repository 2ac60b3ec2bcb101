"""Best-effort parsing of tool-call arguments while their JSON is still streaming in.

Providers send tool arguments as JSON text in fragments. Showing the arguments parsed so
far (a half-written file path, the first edits of a list) is what makes a live view
useful, so an unfinished document is closed at the last point where it still makes sense.
"""

from __future__ import annotations

import json
from typing import Any

# How many cut points to try before giving up; a cut point is where a value ends.
_MAX_ATTEMPTS = 64


def parse_arguments(text: str) -> dict[str, Any]:
    """The arguments object in `text`, or `{}` when it is empty, invalid or not an object."""
    value = _loads(text)
    return value if isinstance(value, dict) else {}


def parse_partial_arguments(text: str) -> dict[str, Any]:
    """The arguments object that a truncated JSON document `text` starts to describe.

    Complete values are kept, an unfinished string value is kept as far as it goes, and an
    unfinished key, number or literal is dropped. Returns `{}` when nothing usable is there.
    """
    if not text.strip():
        return {}
    whole = _loads(text)
    if isinstance(whole, dict):
        return whole
    for attempt, cut in enumerate(_cut_points(text)):
        if attempt >= _MAX_ATTEMPTS:
            break
        closed = _close(text[:cut])
        if closed is None:
            continue
        value = _loads(closed)
        if isinstance(value, dict):
            return value
    return {}


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _cut_points(text: str) -> list[int]:
    """Prefix lengths worth trying, longest first: the whole text, then before each separator."""
    points = [len(text)]
    in_string = False
    escaped = False
    separators: list[int] = []
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch == ",":
            separators.append(i)
        elif ch in "{[":
            separators.append(i + 1)
    points.extend(reversed(separators))
    return points


def _close(prefix: str) -> str | None:
    """`prefix` with an open string and open containers closed, or None if it cannot be."""
    stack: list[str] = []
    in_string = False
    escaped = False
    for ch in prefix:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
    text = prefix
    if in_string:
        if escaped:
            text = text[:-1]
        text = _drop_partial_unicode_escape(text) + '"'
    text = text.rstrip()
    if text.endswith(","):
        text = text[:-1]
    if text.endswith(":"):
        # A key without its value yet: the caller's next cut point drops the key.
        return None
    return text + "".join(reversed(stack))


def _drop_partial_unicode_escape(text: str) -> str:
    """Remove a `\\uXX` escape cut short at the end of an open string."""
    tail = text.rfind("\\u")
    if tail != -1 and len(text) - tail < 6:
        backslashes = len(text[:tail]) - len(text[:tail].rstrip("\\"))
        if backslashes % 2 == 0:
            return text[:tail]
    return text
