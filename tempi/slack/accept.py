"""mom's rules for which Slack events start a run, as a pure function of the event."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tempi.workflows.slack_types import is_slack_id, is_slack_ts

_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")


@dataclass(frozen=True)
class Accepted:
    channel: str
    ts: str
    thread_ts: str | None
    user: str
    text: str
    is_dm: bool
    # Who wrote the thread's first message, for a reply in a thread (Slack's `parent_user_id`).
    parent_user: str | None = None


def strip_mentions(text: str) -> str:
    return _MENTION.sub("", text).strip()


def malformed(event: dict[str, Any]) -> str | None:
    """What is wrong with an event whose channel, user or timestamps are not Slack's (ids
    and ts name folders and files, so `../x` must never get that far), or None."""
    for key, valid in (
        ("channel", is_slack_id),
        ("user", is_slack_id),
        ("ts", is_slack_ts),
        ("thread_ts", is_slack_ts),
    ):
        value = event.get(key)
        if value is not None and not (isinstance(value, str) and valid(value)):
            return f"its {key} {str(value)[:80]!r} is not one Slack writes"
    return None


def accept(event: dict[str, Any], bot_user_id: str) -> Accepted | None:
    """The message a run should answer, or None for events mom only logs or ignores."""
    if malformed(event):
        return None
    kind = event.get("type")
    channel = str(event.get("channel") or "")
    user = event.get("user")
    if not channel or not user or user == bot_user_id or event.get("bot_id"):
        return None
    subtype = event.get("subtype")
    if subtype is not None and subtype != "file_share":
        return None
    text = str(event.get("text") or "")
    ts = str(event.get("ts") or "")
    thread_ts = event.get("thread_ts")
    if kind == "app_mention":
        if channel.startswith("D"):
            return None  # DMs arrive as `message` events
        return Accepted(
            channel, ts, thread_ts, str(user), strip_mentions(text), is_dm=False, parent_user=_parent(event)
        )
    if kind != "message":
        return None
    if event.get("channel_type") != "im":
        return None  # channel messages are only logged; a mention there comes as app_mention
    if f"<@{bot_user_id}>" in text and not channel.startswith("D"):
        return None
    if not text.strip() and not event.get("files"):
        return None
    return Accepted(
        channel, ts, thread_ts, str(user), strip_mentions(text), is_dm=True, parent_user=_parent(event)
    )


def thread_reply(event: dict[str, Any], bot_user_id: str) -> Accepted | None:
    """A person's plain reply in a channel thread (no mention of the bot): in thread mode it
    steers the run going on in that thread, if there is one."""
    if event.get("type") != "message" or event.get("channel_type") == "im" or malformed(event):
        return None
    channel = str(event.get("channel") or "")
    user = event.get("user")
    ts = str(event.get("ts") or "")
    thread_ts = event.get("thread_ts")
    if not channel or not user or user == bot_user_id or event.get("bot_id"):
        return None
    if event.get("subtype") not in (None, "file_share") or not thread_ts or thread_ts == ts:
        return None
    text = str(event.get("text") or "")
    if f"<@{bot_user_id}>" in text or not (text.strip() or event.get("files")):
        return None
    return Accepted(
        channel, ts, str(thread_ts), str(user), strip_mentions(text), is_dm=False, parent_user=_parent(event)
    )


def _parent(event: dict[str, Any]) -> str | None:
    parent = event.get("parent_user_id")
    return parent if isinstance(parent, str) and is_slack_id(parent) else None
