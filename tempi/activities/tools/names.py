"""File names that are not valid UTF-8, in a form a model can read and send back.

POSIX names are bytes. Python decodes them with `surrogateescape`, so a byte that is not
part of valid UTF-8 (0x80-0xff) becomes a lone surrogate U+DC80-U+DCFF. Those cannot be
sent to a provider (or stored in the session file), so the tools show each such byte as
`\\xHH` (the notation of bash's `$'...'`): a file named `caf` + 0xE9 + `.txt` (Latin-1)
is listed as `caf\\xe9.txt`.

Tools accept that form back: a path argument holding `\\xHH` escapes (HH from 80 to ff)
names the file with those bytes, unless a file with the literal name (backslash, x, two
hex digits) exists, which then wins. In bash, `$'caf\\xe9.txt'` names the same file.
"""

from __future__ import annotations

import re
from typing import Any

from tempi.agent.json_strings import map_strings

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_BYTE_ESCAPE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return "\ufffd"  # not from surrogateescape: nothing to name, only to show


def escape_name(name: str) -> str:
    """A name (or path, or any text) from the filesystem, ready to show: undecodable bytes
    as `\\xHH`. Text that was valid UTF-8 comes back unchanged."""
    if _LONE_SURROGATE.search(name) is None:
        return name
    return _LONE_SURROGATE.sub(_shown, name)


def escape_value(value: Any) -> Any:
    """`escape_name` applied to every string (keys included) in a JSON value."""
    return map_strings(value, escape_name)


def decode_name(raw: bytes) -> str:
    """Bytes of a name from a program's output (ripgrep), as shown to the model."""
    return escape_name(raw.decode("utf-8", errors="surrogateescape"))


def has_byte_escapes(path: str) -> bool:
    return _BYTE_ESCAPE.search(path) is not None


def unescape_name(path: str) -> str:
    """A shown path back in Python's surrogateescape form, which the OS functions and
    subprocess arguments turn into the original bytes."""
    return _BYTE_ESCAPE.sub(lambda match: chr(0xDC00 + int(match.group(1), 16)), path)
