"""Rewriting every string of a JSON value, keys included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def map_strings(value: Any, rewrite: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return rewrite(value)
    if isinstance(value, dict):
        return {rewrite(key): map_strings(item, rewrite) for key, item in value.items()}
    if isinstance(value, list):
        return [map_strings(item, rewrite) for item in value]
    return value
