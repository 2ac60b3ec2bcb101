"""Serving a scripted turn as a stream, and cutting a connection where a script says to."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

from aiohttp import web

from tempi.testing.scripted_llm.scenario import ScriptedTurn
from tempi.testing.scripted_llm.wire import StreamChunk, WireApi

logger = logging.getLogger("tempi.testing.scripted_llm")

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"


def streams(request: web.Request, wire: WireApi, body: dict[str, Any]) -> bool:
    """Whether the client asked for a stream: in the body (OpenAI, Anthropic), for Google by
    the method in the path; Bedrock's converse-stream always streams."""
    return (
        bool(body.get("stream"))
        or request.match_info.get("method") == "streamGenerateContent"
        or getattr(wire, "always_streams", False)
    )


async def stream_turn(
    request: web.Request,
    turn: ScriptedTurn,
    events: Iterator[StreamChunk],
    drop_after: int | None,
    content_type: str,
) -> web.StreamResponse:
    response = web.StreamResponse(
        status=200, headers={"Content-Type": content_type, "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    try:
        for sent, event in enumerate(events):
            if drop_after is not None and sent >= drop_after:
                logger.info("dropping the connection of %s after %d events, as scripted", request.path, sent)
                return drop_connection(request, response)
            delay_ms = turn.first_chunk_delay_ms if sent == 0 else turn.chunk_delay_ms
            if delay_ms:
                await asyncio.sleep(delay_ms / 1000)
            await response.write(event.encode())
        await response.write_eof()
    except ConnectionError:
        logger.info("client went away during the stream of %s", request.path)
    return response


def drop_connection(request: web.Request, response: web.StreamResponse | None = None) -> web.StreamResponse:
    # Closing the socket before the final chunk makes the client see a broken stream,
    # which is what a dropped provider connection looks like.
    if request.transport is not None:
        request.transport.close()
    return response if response is not None else web.StreamResponse()
