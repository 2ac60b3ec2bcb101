"""`tempi slack --download CHANNEL`: a channel's whole history with its threads, as mom prints it.

Messages go to stdout oldest first, each thread's replies indented under their parent;
progress goes to stderr so the history can be redirected to a file."""

from __future__ import annotations

import datetime
import sys
from typing import Any, TextIO

from slack_sdk.web.async_client import AsyncWebClient

PAGE = 200


def format_ts(ts: str) -> str:
    when = datetime.datetime.fromtimestamp(int(float(ts) * 1000) / 1000, datetime.UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S")


def format_message(ts: str, user: str, text: str, indent: str = "") -> str:
    """One message; its continuation lines line up under the text's first character."""
    prefix = f"[{format_ts(ts)}] {user}: "
    first, *rest = text.split("\n")
    continuation = indent + " " * len(prefix)
    return "\n".join([f"{indent}{prefix}{first}", *(continuation + line for line in rest)])


async def _pages(call: Any, **args: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = await call(limit=PAGE, cursor=cursor, **args)
        messages.extend(page.get("messages") or [])
        cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
        if not cursor:
            return messages


async def download_channel(web: AsyncWebClient, channel: str, out: TextIO, err: TextIO = sys.stderr) -> None:
    print(f"Fetching channel info for {channel}...", file=err)
    name = channel
    try:
        info = await web.conversations_info(channel=channel)
        name = str((info.get("channel") or {}).get("name") or channel)
    except Exception:
        pass  # a DM has no name
    print(f"Downloading history for #{name} ({channel})...", file=err)
    messages = list(reversed(await _pages(web.conversations_history, channel=channel)))
    print(f"  Fetched {len(messages)} messages...", file=err)
    threads = [m for m in messages if (m.get("reply_count") or 0) > 0]
    print(f"Fetching {len(threads)} threads...", file=err)
    replies: dict[str, list[dict[str, Any]]] = {}
    for i, parent in enumerate(threads, 1):
        print(f"  Thread {i}/{len(threads)} ({parent['reply_count']} replies)...", file=err)
        thread = await _pages(web.conversations_replies, channel=channel, ts=parent["ts"])
        replies[parent["ts"]] = [m for m in thread if m.get("ts") != parent["ts"]]
    total = 0
    for message in messages:
        print(
            format_message(message["ts"], message.get("user") or "unknown", message.get("text") or ""),
            file=out,
        )
        for reply in replies.get(message["ts"], []):
            print(
                format_message(reply["ts"], reply.get("user") or "unknown", reply.get("text") or "", "  "),
                file=out,
            )
            total += 1
    print(f"Done! {len(messages)} messages, {total} thread replies", file=err)
