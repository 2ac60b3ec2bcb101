"""Attribute access over parsed JSON, for stream chunks read without the SDK's models.

Building the OpenAI SDK's pydantic object for every streamed chunk (`construct_type`, field
by field, recursively) was a tenth of a busy worker's time (issue 13); tempi reads a few
fields of each chunk, so it asks the SDK for the parsed JSON and reads those through this.
A field the chunk does not have reads as None, as an unset SDK field does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any


class JsonView:
    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        return viewed(self._data.get(name))


def viewed(value: Any) -> Any:
    if isinstance(value, dict):
        return JsonView(value)
    if isinstance(value, list):
        return [viewed(item) for item in value]
    return value


async def json_views(chunks: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for chunk in chunks:
        yield viewed(chunk)
