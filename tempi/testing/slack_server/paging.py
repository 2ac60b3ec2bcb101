"""Argument coercion and cursor paging shared by the Web API methods."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tempi.testing.slack_server.ids import decode_cursor, encode_cursor

T = TypeVar("T")


class SlackError(Exception):
    """A Web API failure, answered as Slack does: `{"ok": false, "error": code}`."""

    def __init__(self, code: str, status: int = 200, **extra: Any) -> None:
        super().__init__(code)
        self.code = code
        self.status = status
        self.extra = extra


def required(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if value is None or value == "":
        raise SlackError(
            "invalid_arguments", response_metadata={"messages": [f"[ERROR] missing required field: {name}"]}
        )
    return str(value)


def int_arg(args: dict[str, Any], name: str, default: int, maximum: int) -> int:
    value = args.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError) as err:
        raise SlackError("invalid_arguments") from err
    return default if number <= 0 else min(number, maximum)


def bool_arg(args: dict[str, Any], name: str, default: bool = False) -> bool:
    value = args.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    return str(value).lower() in ("1", "true")


def page(
    items: Sequence[T], key: Callable[[T], str], kind: str, cursor: str | None, limit: int
) -> tuple[list[T], dict[str, str]]:
    """One page of `items` from `cursor` on, and the `response_metadata` with the next cursor
    (an empty `next_cursor` on the last page, as Slack)."""
    start = 0
    if cursor:
        start_key = decode_cursor(cursor, kind)
        if start_key is None:
            raise SlackError("invalid_cursor")
        keys = [key(item) for item in items]
        if start_key not in keys:
            raise SlackError("invalid_cursor")
        start = keys.index(start_key)
    chunk = list(items[start : start + limit])
    rest = items[start + limit :]
    return chunk, {"next_cursor": encode_cursor(kind, key(rest[0])) if rest else ""}
