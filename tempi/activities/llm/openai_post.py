"""Streaming requests to OpenAI's APIs through the SDK's client, with the body tempi built.

The SDK's `create()` first walks every parameter against its TypedDicts
(`async_maybe_transform`) to rename aliased keys and encode dates and files. OpenAI's
chat and responses parameters have none of those, and tempi's bodies are plain JSON, so the
walk returns what it was given; it cost tens of milliseconds per call on a long context
and grew with it (issue 13). `client.post` is the SDK's own entry for a body sent as is:
retries, headers, errors and the event stream are the same as `create()`'s. A body already
encoded (`conversation_cache`) goes as those bytes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import openai

# What `create()` asks for: the API key as a bearer token.
BEARER_AUTH: Any = {"bearer_auth": True}


async def post_stream(
    client: openai.AsyncOpenAI,
    path: str,
    body: dict[str, Any] | bytes,
    cast_to: type[Any],
    event: Any,
    headers: Mapping[str, str | openai.Omit] | None = None,
) -> openai.AsyncStream[Any]:
    """`headers` are this request's own; an `openai.Omit()` value removes one the SDK adds."""
    options: Any = {"security": BEARER_AUTH}
    if headers is not None:
        options["headers"] = headers
    stream: openai.AsyncStream[Any] = await client.post(
        path,
        body=None if isinstance(body, bytes) else body,
        content=body if isinstance(body, bytes) else None,
        cast_to=cast_to,
        stream=True,
        stream_cls=openai.AsyncStream[event],
        options=options,
    )
    return stream
