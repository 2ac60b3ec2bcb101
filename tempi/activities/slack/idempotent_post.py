"""Posting exactly once across retries. Slack has no idempotency key, so each post carries one
in its message `metadata`; a retried post first looks for a message of the bot's with that key
(the attempt before may have been done in Slack with its answer lost, as when the gateway died
mid-request) and answers that message's ts instead of posting again."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from slack_sdk.web.async_client import AsyncWebClient
from temporalio import activity

T = TypeVar("T")

EVENT_TYPE = "tempi_post"
# Slack's clock and the worker's differ a little; the retry looks this far before the first attempt.
CLOCK_SKEW_S = 300
PAGE = 200
MAX_PAGES = 10
# Under the workflow's heartbeat timeout for Slack calls, so a live call never times out.
HEARTBEAT_EVERY_S = 1.0


def post_key(info: activity.Info) -> str:
    """The same for every attempt of one post, different for every other post."""
    ident = f"{info.workflow_id}/{info.workflow_run_id}/{info.activity_id}"
    return hashlib.sha256(ident.encode()).hexdigest()[:24]


def post_metadata(key: str) -> dict[str, Any]:
    return {"event_type": EVENT_TYPE, "event_payload": {"key": key}}


def _has_key(message: dict[str, Any], key: str) -> bool:
    metadata = message.get("metadata") or {}
    return (
        metadata.get("event_type") == EVENT_TYPE and (metadata.get("event_payload") or {}).get("key") == key
    )


async def find_posted(
    web: AsyncWebClient, channel: str, thread_ts: str | None, key: str, since: float
) -> str | None:
    """The ts of the bot's message carrying `key`, posted since `since` (a Unix time), if any."""
    oldest = f"{max(since - CLOCK_SKEW_S, 0):.6f}"
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        if thread_ts is None:
            page = await web.conversations_history(
                channel=channel,
                oldest=oldest,
                inclusive=True,
                include_all_metadata=True,
                limit=PAGE,
                cursor=cursor,
            )
        else:
            page = await web.conversations_replies(
                channel=channel,
                ts=thread_ts,
                oldest=oldest,
                inclusive=True,
                include_all_metadata=True,
                limit=PAGE,
                cursor=cursor,
            )
        for message in page.get("messages") or []:
            if _has_key(message, key):
                return str(message["ts"])
        cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
        if not cursor:
            return None
    return None


async def heartbeating(call: Awaitable[T]) -> T:
    """Await a Slack call while telling Temporal the worker lives, so a worker that dies
    mid-call has its call retried on another within seconds, not at the call's timeout."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_EVERY_S)

    beating = asyncio.ensure_future(beat())
    try:
        return await call
    finally:
        beating.cancel()
