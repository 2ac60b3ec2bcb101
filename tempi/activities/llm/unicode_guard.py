"""Keeping lone surrogates out of everything a provider stream produces.

JSON lets a provider send `"\\udcff"`, which Python decodes to a lone surrogate: a str
that cannot be encoded as UTF-8. One of those in an assistant message breaks every writer
downstream (the live side file, the session file, Temporal's payloads, a client printing
`--mode json`), so the assembler cleans text as it arrives: text and thinking get U+FFFD,
streamed tool-argument JSON has such escapes rewritten to `\\ufffd` before it is passed
on, and a finished call whose arguments hold one is refused (see `invalid_call`).
"""

from __future__ import annotations

import re
from typing import Any

from tempi.agent.json_strings import map_strings

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# An escape in JSON text that may decode to a surrogate (paired or not).
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_HEX = frozenset("0123456789abcdefABCDEF")
_SAFE_ESCAPE = "\\ufffd"


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD."""
    if _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def clean_optional(text: str | None) -> str | None:
    return None if text is None else clean_text(text)


def holds_lone_surrogate(value: Any) -> bool:
    """Whether any string in a JSON value (keys included) holds a lone surrogate."""
    if isinstance(value, str):
        return _LONE_SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(holds_lone_surrogate(key) or holds_lone_surrogate(item) for key, item in value.items())
    if isinstance(value, list):
        return any(holds_lone_surrogate(item) for item in value)
    return False


def clean_value(value: Any) -> Any:
    """A JSON value with every string (keys included) passed through `clean_text`."""
    return map_strings(value, clean_text)


def _hex4(text: str, at: int) -> int | None:
    digits = text[at : at + 4]
    if len(digits) < 4 or not all(ch in _HEX for ch in digits):
        return None
    return int(digits, 16)


def _rewrite_escapes(text: str, final: bool) -> tuple[str, int]:
    """(the part of `text` that is decided, with lone-surrogate escapes made `\\ufffd`;
    how many characters of `text` it covers). An escape cut off at the end, or a high
    surrogate whose low half may still follow, waits for more text unless `final`."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        slash = text.find("\\", i)
        if slash < 0:
            out.append(text[i:])
            return "".join(out), n
        out.append(text[i:slash])
        i = slash
        if i + 1 >= n:
            break
        if text[i + 1] != "u":
            out.append(text[i : i + 2])
            i += 2
            continue
        code = _hex4(text, i + 2)
        if code is None:
            if n - (i + 2) < 4 and not final:
                break  # `\u` and fewer than four hex digits so far
            out.append(text[i : i + 2])
            i += 2
            continue
        if 0xD800 <= code <= 0xDBFF:
            if n - (i + 6) < 6 and not final:
                break  # its low half may be on the way
            low = _hex4(text, i + 8) if text[i + 6 : i + 8] == "\\u" else None
            if low is not None and 0xDC00 <= low <= 0xDFFF:
                out.append(text[i : i + 12])
                i += 12
                continue
            out.append(_SAFE_ESCAPE)
        elif 0xDC00 <= code <= 0xDFFF:
            out.append(_SAFE_ESCAPE)
        else:
            out.append(text[i : i + 6])
        i += 6
    if final:
        out.append(text[i:])
        i = n
    return "".join(out), i


class JsonDeltaGuard:
    """Rewrites streamed JSON text piece by piece so that the pieces, joined and decoded,
    never hold a lone surrogate. Valid surrogate pairs (`\\ud83d\\ude00`) pass unchanged."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, delta: str) -> str:
        text = self._held + clean_text(delta)
        if "\\" not in text:
            self._held = ""
            return text
        shown, used = _rewrite_escapes(text, final=False)
        self._held = text[used:]
        return shown

    def flush(self) -> str:
        shown, _ = _rewrite_escapes(self._held, final=True)
        self._held = ""
        return shown
