"""Writes what people say in Slack to the channels' log.jsonl, as mom does: every channel
message the bot can see (not only those that start a run), attachments downloaded with the
bot token next to it, and at start what people said while no gateway listened."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from tempi.activities.slack.attachments import download, planned_attachments
from tempi.activities.slack.channel_log import (
    LoggedAttachment,
    LoggedMessage,
    append_new,
    log_path,
    logged_ts,
    newest_ts,
    ts_date,
)
from tempi.slack.accept import malformed
from tempi.workflows.slack_types import is_slack_id

log = logging.getLogger("tempi.slack")

BACKFILL_PAGE = 1000
BACKFILL_PAGES = 3


def mention_as_name(text: str, bot_user_id: str, bot_name: str) -> str:
    """mom's log text: the bot's mention markup becomes `@name`, other mentions stay as Slack wrote them."""
    if not text:
        return ""
    return re.sub(re.escape(f"<@{bot_user_id}>"), f"@{bot_name}", text, flags=re.IGNORECASE).strip()


def is_logged_event(event: dict[str, Any], bot_user_id: str) -> bool:
    """Whether mom writes a live event to the log (a channel mention arrives twice: logged once)."""
    kind = event.get("type")
    channel = str(event.get("channel") or "")
    if not channel:
        return False
    if kind == "app_mention":
        return not channel.startswith("D") and bool(event.get("user"))
    if kind != "message":
        return False
    return _is_person_message(event, bot_user_id) and not (
        event.get("channel_type") != "im" and f"<@{bot_user_id}>" in str(event.get("text") or "")
    )


def _is_person_message(message: dict[str, Any], bot_user_id: str) -> bool:
    if malformed(message):
        return False
    user = message.get("user")
    if message.get("bot_id") or not user or user == bot_user_id:
        return False
    subtype = message.get("subtype")
    if subtype is not None and subtype != "file_share":
        return False
    return bool(message.get("text")) or bool(message.get("files"))


class ChannelRecorder:
    def __init__(
        self,
        web: AsyncWebClient,
        working_dir: str,
        bot_token: str,
        names: Callable[[str], Awaitable[tuple[str | None, str | None]]],
    ) -> None:
        """`names` gives a user's (userName, displayName), or Nones for someone unknown."""
        self.web = web
        self.working_dir = working_dir
        self.bot_token = bot_token
        self.names = names
        self.bot_user_id = ""
        self.bot_name = "mom"

    async def record_event(self, event: dict[str, Any]) -> list[LoggedAttachment]:
        """Log a live event if mom would; returns its attachments (downloaded) for the run."""
        if not is_logged_event(event, self.bot_user_id):
            return []
        entry = await self._entry(str(event["channel"]), event)
        append_new(log_path(self.working_dir, str(event["channel"])), [entry])
        return entry.attachments

    async def _entry(self, channel: str, message: dict[str, Any]) -> LoggedMessage:
        """A person's message as a log line (the bot's lines are the workflow's to write)."""
        ts = str(message["ts"])
        thread_ts = message.get("thread_ts")
        attachments = await self._download_all(channel, message.get("files") or [], ts)
        user_name, display_name = await self.names(str(message["user"]))
        return LoggedMessage(
            date=ts_date(ts),
            ts=ts,
            thread_ts=str(thread_ts) if thread_ts and thread_ts != ts else None,
            user=str(message["user"]),
            user_name=user_name,
            display_name=display_name,
            text=mention_as_name(str(message.get("text") or ""), self.bot_user_id, self.bot_name),
            attachments=attachments,
        )

    async def _download_all(
        self, channel: str, files: list[dict[str, Any]], ts: str
    ) -> list[LoggedAttachment]:
        attachments = []
        for attachment, url in planned_attachments(channel, files, ts):
            dest = Path(self.working_dir) / attachment.local
            if not dest.exists():
                try:
                    await download(url, dest, self.bot_token)
                except Exception as err:
                    # As mom: the message is still logged; the agent finds the file missing.
                    log.warning("could not download %s: %s", attachment.original, err)
            attachments.append(attachment)
        return attachments

    # --- backfill ----------------------------------------------------------------------

    async def backfill(self) -> int:
        """Log what was said in channels with a log while no gateway listened."""
        started = time.monotonic()
        total = 0
        for channel in await self._member_channels():
            if not log_path(self.working_dir, channel).exists():
                continue  # mom only backfills channels it has talked in
            try:
                total += await self._backfill_channel(channel)
            except Exception as err:
                log.warning("could not backfill %s: %s", channel, err)
        log.info("backfill: %d messages in %.1fs", total, time.monotonic() - started)
        return total

    async def _member_channels(self) -> list[str]:
        found: list[str] = []
        for types, exclude_archived in (("public_channel,private_channel", True), ("im", False)):
            cursor: str | None = None
            while True:
                page = await self.web.conversations_list(
                    types=types, exclude_archived=exclude_archived, limit=200, cursor=cursor
                )
                for channel in page.get("channels") or []:
                    if not is_slack_id(str(channel.get("id"))):
                        log.warning("skipping channel %r: not a Slack channel id", channel.get("id"))
                    elif channel.get("is_im") or channel.get("is_member"):
                        found.append(str(channel["id"]))
                cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
                if not cursor:
                    break
        return found

    async def _backfill_channel(self, channel: str) -> int:
        path = log_path(self.working_dir, channel)
        newest = newest_ts(path)
        messages: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(BACKFILL_PAGES):
            page = await self.web.conversations_history(
                channel=channel, oldest=newest, inclusive=False, limit=BACKFILL_PAGE, cursor=cursor
            )
            messages.extend(page.get("messages") or [])
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                break
        held = logged_ts(path)
        wanted = [m for m in messages if m.get("ts") and m["ts"] not in held and self._backfilled(m)]
        entries = [await self._entry(channel, m) for m in sorted(wanted, key=lambda m: float(m["ts"]))]
        return len(append_new(path, entries))

    def _backfilled(self, message: dict[str, Any]) -> bool:
        # Unlike mom, the bot's own posts are not backfilled: each run's workflow logs what it
        # answered once the run ends, even across a crash. A copy taken here could only repeat
        # that line or, caught while another (or a restarted) gateway's run still edits it,
        # keep a half-posted answer.
        return _is_person_message(message, self.bot_user_id)
