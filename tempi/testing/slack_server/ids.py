"""Slack-shaped identifiers: ids, message timestamps and opaque paging cursors."""

from __future__ import annotations

import base64
import itertools
import time


class IdMaker:
    """Hands out ids with Slack's prefixes (U users, C/G/D channels, F files, Ev events)."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def make(self, prefix: str) -> str:
        return f"{prefix}{next(self._counter):08X}"


class TsClock:
    """Message timestamps as Slack writes them ("1700000000.000100"), strictly increasing.

    Slack's `ts` is both a time and a message's id within a channel, so two messages must
    never share one even when they are created within the same microsecond.
    """

    def __init__(self) -> None:
        self._last_micros = 0

    def next(self) -> str:
        micros = max(int(time.time() * 1_000_000), self._last_micros + 1)
        self._last_micros = micros
        return format_ts(micros)


def format_ts(micros: int) -> str:
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


def ts_micros(ts: str) -> int:
    """A `ts` (or an `oldest`/`latest` bound such as "0" or "1700000000") as microseconds."""
    seconds, _, fraction = ts.partition(".")
    return int(seconds or "0") * 1_000_000 + int((fraction + "000000")[:6])


def encode_cursor(kind: str, key: str) -> str:
    # Slack's cursors are base64 of "kind:key" (e.g. "dXNlcjpVMDYxTkZUVDI=" is "user:U061NFTT2").
    return base64.b64encode(f"{kind}:{key}".encode()).decode()


def decode_cursor(cursor: str, kind: str) -> str | None:
    """The key inside `cursor`, or None if it is not a cursor of this kind."""
    try:
        text = base64.b64decode(cursor.encode(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    prefix, sep, key = text.partition(":")
    return key if sep and prefix == kind else None
