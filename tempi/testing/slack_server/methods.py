"""The Web API methods mom uses (except files), over the workspace."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from tempi.testing.slack_server.events import (
    bot_message_event,
    event_callback,
    message_changed_event,
    message_deleted_event,
)
from tempi.testing.slack_server.ids import ts_micros
from tempi.testing.slack_server.paging import SlackError, bool_arg, int_arg, page, required
from tempi.testing.slack_server.records import BotAction
from tempi.testing.slack_server.socket_mode import SocketModeHub
from tempi.testing.slack_server.workspace import TYPE_NAMES, Channel, Message, Workspace

# Slack cuts a message's text at 40,000 characters.
MAX_TEXT = 40_000

Method = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class SlackMethods:
    def __init__(self, workspace: Workspace, hub: SocketModeHub, echo_bot_events: bool = True) -> None:
        self.workspace = workspace
        self.hub = hub
        self.echo_bot_events = echo_bot_events
        self.actions: list[BotAction] = []
        self.socket_url: Callable[[str], str] = lambda ticket: ""

    def table(self) -> dict[str, Method]:
        return {
            "auth.test": self.auth_test,
            "users.list": self.users_list,
            "conversations.list": self.conversations_list,
            "conversations.info": self.conversations_info,
            "conversations.history": self.conversations_history,
            "conversations.replies": self.conversations_replies,
            "chat.postMessage": self.chat_post_message,
            "chat.update": self.chat_update,
            "chat.delete": self.chat_delete,
            "apps.connections.open": self.apps_connections_open,
        }

    # -- lookups -----------------------------------------------------------------------

    def channel(self, args: dict[str, Any], *, for_reading: bool = True) -> Channel:
        channel_id = required(args, "channel")
        ws = self.workspace
        if channel_id.startswith("U") and channel_id in ws.users and not for_reading:
            # Posting to a user id posts into the bot's DM with that user, as Slack does.
            return ws.open_dm(channel_id)
        channel = ws.channels.get(channel_id)
        if channel is None:
            raise SlackError("channel_not_found")
        return channel

    def member_channel(self, args: dict[str, Any], *, for_reading: bool = True) -> Channel:
        channel = self.channel(args, for_reading=for_reading)
        if self.workspace.bot_user_id not in channel.members:
            raise SlackError("not_in_channel")
        return channel

    def publish(self, event: dict[str, Any]) -> None:
        if self.echo_bot_events:
            self.hub.publish(event_callback(self.workspace, event))

    def record(self, kind: str, message: Message, text: str) -> None:
        self.actions.append(
            BotAction.model_validate(
                {
                    "kind": kind,
                    "channel": message.channel,
                    "ts": message.ts,
                    "thread_ts": message.thread_ts,
                    "text": text,
                    "at": time.time(),
                }
            )
        )

    # -- identity ----------------------------------------------------------------------

    async def auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspace
        return {
            "url": f"https://{ws.team_name}.slack.com/",
            "team": ws.team_name,
            "user": ws.bot.name,
            "team_id": ws.team_id,
            "user_id": ws.bot_user_id,
            "bot_id": ws.bot.bot_id,
            "is_enterprise_install": False,
        }

    async def apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.socket_url(self.hub.issue_ticket())}

    async def users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        users = sorted(self.workspace.users.values(), key=lambda u: u.id)
        limit = int_arg(args, "limit", default=1000, maximum=1000)
        chunk, metadata = page(users, lambda u: u.id, "user", args.get("cursor"), limit)
        return {
            "members": [u.to_slack() for u in chunk],
            "cache_ts": int(time.time()),
            "response_metadata": metadata,
        }

    # -- conversations -----------------------------------------------------------------

    async def conversations_list(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspace
        types = {t.strip() for t in str(args.get("types") or "public_channel").split(",") if t.strip()}
        unknown = types - set(TYPE_NAMES.values())
        if unknown:
            raise SlackError("invalid_types")
        exclude_archived = bool_arg(args, "exclude_archived")
        bot = ws.bot_user_id

        def visible(channel: Channel) -> bool:
            if TYPE_NAMES[channel.kind] not in types or (exclude_archived and channel.is_archived):
                return False
            # A bot sees every public channel, but private ones and DMs only where it is in.
            return channel.kind == "public" or bot in channel.members

        channels = sorted((c for c in ws.channels.values() if visible(c)), key=lambda c: c.id)
        limit = int_arg(args, "limit", default=100, maximum=1000)
        chunk, metadata = page(channels, lambda c: c.id, "team", args.get("cursor"), limit)
        return {"channels": [c.to_slack(bot) for c in chunk], "response_metadata": metadata}

    async def conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self.channel(args)
        if channel.kind != "public" and self.workspace.bot_user_id not in channel.members:
            raise SlackError("channel_not_found")
        return {"channel": channel.to_slack(self.workspace.bot_user_id)}

    async def conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self.member_channel(args)
        ws = self.workspace
        in_range = _ts_range(args)
        top_level = [m for m in ws.live_messages(channel.id) if not m.is_reply and in_range(m.ts)]
        newest_first = list(reversed(top_level))
        limit = int_arg(args, "limit", default=100, maximum=999)
        chunk, metadata = page(newest_first, lambda m: m.ts, "next_ts", args.get("cursor"), limit)
        with_metadata = bool_arg(args, "include_all_metadata")
        return {
            "messages": [ws.message_to_slack(m, with_metadata=with_metadata) for m in chunk],
            "has_more": bool(metadata["next_cursor"]),
            "pin_count": 0,
            "channel_actions_ts": None,
            "channel_actions_count": 0,
            "response_metadata": metadata,
        }

    async def conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self.member_channel(args)
        ws = self.workspace
        parent = ws.message(channel.id, required(args, "ts"))
        if parent is None:
            raise SlackError("thread_not_found")
        in_range = _ts_range(args)
        replies = [ws.messages[channel.id][ts] for ts in parent.reply_ts]
        thread = [
            parent,
            *sorted((r for r in replies if not r.deleted and in_range(r.ts)), key=lambda m: m.ts),
        ]
        limit = int_arg(args, "limit", default=1000, maximum=1000)
        chunk, metadata = page(thread, lambda m: m.ts, "next_ts", args.get("cursor"), limit)
        with_metadata = bool_arg(args, "include_all_metadata")
        return {
            "messages": [ws.message_to_slack(m, with_metadata=with_metadata) for m in chunk],
            "has_more": bool(metadata["next_cursor"]),
            "response_metadata": metadata,
        }

    # -- chat --------------------------------------------------------------------------

    async def chat_post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self.member_channel(args, for_reading=False)
        text = _text(args)
        ws = self.workspace
        thread_ts = args.get("thread_ts") or None
        if thread_ts is not None:
            parent = ws.message(channel.id, str(thread_ts))
            # A reply to a reply lands in the thread of the first one.
            thread_ts = (parent.thread_ts or parent.ts) if parent is not None else str(thread_ts)
        message = ws.add_message(
            Message(
                channel=channel.id,
                ts=ws.clock.next(),
                user=ws.bot_user_id,
                text=text,
                thread_ts=thread_ts,
                bot_id=ws.bot.bot_id,
                metadata=_metadata(args),
            )
        )
        self.record("post", message, text)
        self.publish(bot_message_event(ws, message))
        return {"channel": channel.id, "ts": message.ts, "message": self._bot_view(message)}

    async def chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self.member_channel(args)
        message = self._own_message(channel, required(args, "ts"), "cant_update_message")
        text = _text(args)
        previous = message.text
        message.text = text
        message.texts.append(text)
        message.edited_ts = self.workspace.clock.next()
        self.record("update", message, text)
        self.publish(message_changed_event(self.workspace, message, previous))
        return {"channel": channel.id, "ts": message.ts, "text": text, "message": self._bot_view(message)}

    async def chat_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self.member_channel(args)
        message = self._own_message(channel, required(args, "ts"), "cant_delete_message")
        message.deleted = True
        self.record("delete", message, message.text)
        self.publish(message_deleted_event(self.workspace, message))
        return {"channel": channel.id, "ts": message.ts}

    def _own_message(self, channel: Channel, ts: str, refusal: str) -> Message:
        message = self.workspace.message(channel.id, ts)
        if message is None:
            raise SlackError("message_not_found")
        if message.user != self.workspace.bot_user_id:
            raise SlackError(refusal)
        return message

    def _bot_view(self, message: Message) -> dict[str, Any]:
        ws = self.workspace
        body = ws.message_to_slack(message, with_metadata=True)
        body["bot_profile"] = {
            "id": ws.bot.bot_id,
            "app_id": ws.app_id,
            "name": ws.bot.name,
            "team_id": ws.team_id,
            "deleted": False,
            "updated": 1700000000,
            "icons": {},
        }
        return body


def _text(args: dict[str, Any]) -> str:
    text = args.get("text")
    if text is None or text == "":
        if args.get("blocks") or args.get("attachments"):
            return ""
        raise SlackError("no_text")
    return str(text)[:MAX_TEXT]


def _metadata(args: dict[str, Any]) -> dict[str, Any] | None:
    """A message's `metadata`: an object (JSON bodies) or its JSON text (forms), with a string
    `event_type` and an object `event_payload`, as Slack checks it."""
    raw = args.get("metadata")
    if raw is None or raw == "":
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise SlackError("invalid_metadata_format") from None
    if (
        not isinstance(raw, dict)
        or not isinstance(raw.get("event_type"), str)
        or not isinstance(raw.get("event_payload"), dict)
    ):
        raise SlackError("invalid_metadata_schema")
    return {"event_type": raw["event_type"], "event_payload": raw["event_payload"]}


def _ts_range(args: dict[str, Any]) -> Callable[[str], bool]:
    """conversations.history's window: `oldest` < ts < `latest`, ends included with `inclusive`."""
    oldest = ts_micros(str(args.get("oldest") or "0"))
    latest_arg = args.get("latest")
    latest = ts_micros(str(latest_arg)) if latest_arg else None
    inclusive = bool_arg(args, "inclusive")

    def in_range(ts: str) -> bool:
        micros = ts_micros(ts)
        above = micros >= oldest if inclusive else micros > oldest
        below = latest is None or (micros <= latest if inclusive else micros < latest)
        return above and below

    return in_range


def new_client_msg_id() -> str:
    return str(uuid.uuid4())
