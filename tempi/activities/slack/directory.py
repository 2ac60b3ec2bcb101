"""Who and where, for mom's prompt: the workspace's people and the bot's channels, listed
from the Web API and kept for a while so a busy channel does not list them every run."""

from __future__ import annotations

import logging
import time
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from tempi.activities.slack.mom_prompt import SlackChannel, SlackUser

log = logging.getLogger("tempi.slack")
KEEP_S = 300.0


async def _pages(call: Any, key: str, **kwargs: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = await call(cursor=cursor, **kwargs)
        items += page.get(key) or []
        cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
        if not cursor:
            return items


class SlackDirectory:
    def __init__(self) -> None:
        self.users: list[SlackUser] = []
        self.channels: list[SlackChannel] = []
        self._listed_at: float | None = None

    async def refresh(self, web: AsyncWebClient) -> None:
        if self._listed_at is not None and time.monotonic() - self._listed_at < KEEP_S:
            return
        try:
            members = await _pages(web.users_list, "members", limit=200)
            channels = await _pages(
                web.conversations_list,
                "channels",
                types="public_channel,private_channel",
                exclude_archived=True,
                limit=200,
            )
        except Exception:
            # A prompt without the ID tables still works; the next run tries again.
            log.exception("could not list Slack users and channels for mom's prompt")
            return
        self.users = [
            SlackUser(
                id=m["id"],
                name=m.get("name") or m["id"],
                display_name=(m.get("profile") or {}).get("display_name") or m.get("real_name") or "",
            )
            for m in members
            if not m.get("deleted")
        ]
        self.channels = [
            SlackChannel(id=c["id"], name=c.get("name") or c["id"])
            for c in channels
            if c.get("is_member", True)
        ]
        self._listed_at = time.monotonic()
