"""How deeply JSON nests, measured without recursion.

Python's decoder, pydantic's serializer and every walk over a value recurse once per level,
so JSON from outside (an RPC command, a model's tool-call arguments) is refused past
MAX_JSON_DEPTH levels, far deeper than any real document and far short of those limits.
"""

from __future__ import annotations

import re
from typing import Any

MAX_JSON_DEPTH = 64

# A JSON string (skipped whole, escapes included) or one bracket.
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in `value` (iteratively: no recursion limit)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in item if isinstance(child, (dict, list)))
    return deepest


def text_depth(text: str) -> int:
    """How deeply arrays and objects nest in the JSON text `text`, finished or not: the most
    brackets open at once outside strings. Linear in the text and needs no parse."""
    deepest = depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        ch = match.group()
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest
