"""The workspace's state (users, conversations, messages, files) and its Slack JSON shapes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from tempi.testing.slack_server.ids import IdMaker, TsClock

ChannelKind = Literal["public", "private", "im", "mpim"]

# What Slack calls each kind in `conversations.list?types=` and in an event's `channel_type`.
TYPE_NAMES: dict[ChannelKind, str] = {
    "public": "public_channel",
    "private": "private_channel",
    "im": "im",
    "mpim": "mpim",
}
EVENT_CHANNEL_TYPES: dict[ChannelKind, str] = {
    "public": "channel",
    "private": "group",
    "im": "im",
    "mpim": "mpim",
}


@dataclass
class User:
    id: str
    name: str
    real_name: str
    display_name: str
    team_id: str
    is_bot: bool = False
    deleted: bool = False
    bot_id: str | None = None

    def to_slack(self) -> dict[str, Any]:
        profile: dict[str, Any] = {
            "real_name": self.real_name,
            "display_name": self.display_name,
            "real_name_normalized": self.real_name,
            "display_name_normalized": self.display_name,
            "team": self.team_id,
        }
        if self.bot_id:
            profile["bot_id"] = self.bot_id
        return {
            "id": self.id,
            "team_id": self.team_id,
            "name": self.name,
            "deleted": self.deleted,
            "real_name": self.real_name,
            "tz": "Europe/Berlin",
            "tz_offset": 3600,
            "is_admin": False,
            "is_owner": False,
            "is_bot": self.is_bot,
            "is_app_user": False,
            "updated": 1700000000,
            "profile": profile,
        }


@dataclass
class Channel:
    id: str
    name: str
    kind: ChannelKind
    members: set[str]
    created: int
    is_archived: bool = False
    # For a DM: the human on the other side of the bot.
    im_user: str | None = None

    def to_slack(self, viewer: str) -> dict[str, Any]:
        if self.kind == "im":
            return {
                "id": self.id,
                "created": self.created,
                "is_im": True,
                "is_org_shared": False,
                "user": self.im_user,
                "is_user_deleted": False,
                "priority": 0,
            }
        return {
            "id": self.id,
            "name": self.name,
            "is_channel": self.kind == "public",
            "is_group": self.kind == "private",
            "is_im": False,
            "is_mpim": self.kind == "mpim",
            "is_private": self.kind != "public",
            "created": self.created,
            "is_archived": self.is_archived,
            "is_general": False,
            "name_normalized": self.name,
            "is_shared": False,
            "is_org_shared": False,
            "is_member": viewer in self.members,
            "num_members": len(self.members),
            "topic": {"value": "", "creator": "", "last_set": 0},
            "purpose": {"value": "", "creator": "", "last_set": 0},
        }


@dataclass
class StoredFile:
    id: str
    name: str
    title: str
    mimetype: str
    user: str
    created: int
    content: bytes | None = None
    # Set by files.getUploadURLExternal, checked by the upload and the completion.
    expected_length: int | None = None
    url_private: str = ""
    url_private_download: str = ""

    def to_slack(self) -> dict[str, Any]:
        filetype = self.name.rsplit(".", 1)[-1].lower() if "." in self.name else "binary"
        return {
            "id": self.id,
            "created": self.created,
            "timestamp": self.created,
            "name": self.name,
            "title": self.title,
            "mimetype": self.mimetype,
            "filetype": filetype,
            "pretty_type": filetype.upper(),
            "user": self.user,
            "mode": "hosted",
            "editable": False,
            "is_external": False,
            "external_type": "",
            "is_public": True,
            "size": len(self.content or b""),
            "url_private": self.url_private,
            "url_private_download": self.url_private_download,
        }


@dataclass
class Message:
    """One message, with every text it ever had so tests can see edits in place."""

    channel: str
    ts: str
    user: str
    text: str
    thread_ts: str | None = None
    bot_id: str | None = None
    subtype: str | None = None
    file_ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    edited_ts: str | None = None
    deleted: bool = False
    reply_ts: list[str] = field(default_factory=list)
    client_msg_id: str | None = None
    # chat.postMessage's `metadata` ({"event_type", "event_payload"}), as an app attaches it.
    metadata: dict[str, Any] | None = None

    @property
    def is_reply(self) -> bool:
        return self.thread_ts is not None and self.thread_ts != self.ts


class Workspace:
    """Everything the Web API reads and writes; one bot, any number of humans."""

    def __init__(self, team_id: str = "T0TEMPI01", bot_name: str = "mom") -> None:
        self.ids = IdMaker()
        self.clock = TsClock()
        self.team_id = team_id
        self.team_name = "tempi-test"
        self.app_id = "A0TEMPIAPP"
        self.users: dict[str, User] = {}
        self.channels: dict[str, Channel] = {}
        self.messages: dict[str, dict[str, Message]] = {}
        self.files: dict[str, StoredFile] = {}
        bot_user = self.ids.make("U")
        self.bot = User(
            id=bot_user,
            name=bot_name,
            real_name=bot_name,
            display_name=bot_name,
            team_id=team_id,
            is_bot=True,
            bot_id="B0TEMPIBOT",
        )
        self.users[self.bot.id] = self.bot

    @property
    def bot_user_id(self) -> str:
        return self.bot.id

    def add_user(
        self,
        name: str,
        real_name: str | None = None,
        display_name: str | None = None,
        deleted: bool = False,
        is_bot: bool = False,
    ) -> User:
        user = User(
            id=self.ids.make("U"),
            name=name,
            real_name=real_name or name,
            display_name=display_name if display_name is not None else name,
            team_id=self.team_id,
            deleted=deleted,
            is_bot=is_bot,
        )
        self.users[user.id] = user
        return user

    def add_channel(
        self,
        name: str,
        members: list[str] | None = None,
        private: bool = False,
        bot_is_member: bool = True,
        archived: bool = False,
    ) -> Channel:
        member_set = set(members or [])
        if bot_is_member:
            member_set.add(self.bot.id)
        channel = Channel(
            id=self.ids.make("G" if private else "C"),
            name=name,
            kind="private" if private else "public",
            members=member_set,
            created=int(time.time()),
            is_archived=archived,
        )
        return self._register(channel)

    def open_dm(self, user_id: str) -> Channel:
        for channel in self.channels.values():
            if channel.kind == "im" and channel.im_user == user_id:
                return channel
        channel = Channel(
            id=self.ids.make("D"),
            name=user_id,
            kind="im",
            members={user_id, self.bot.id},
            created=int(time.time()),
            im_user=user_id,
        )
        return self._register(channel)

    def _register(self, channel: Channel) -> Channel:
        self.channels[channel.id] = channel
        self.messages[channel.id] = {}
        return channel

    # -- messages ----------------------------------------------------------------------

    def add_message(self, message: Message) -> Message:
        message.texts = [message.text]
        self.messages[message.channel][message.ts] = message
        if message.is_reply and message.thread_ts is not None:
            parent = self.messages[message.channel].get(message.thread_ts)
            if parent is not None:
                parent.reply_ts.append(message.ts)
        return message

    def message(self, channel: str, ts: str) -> Message | None:
        found = self.messages.get(channel, {}).get(ts)
        return None if found is None or found.deleted else found

    def live_messages(self, channel: str) -> list[Message]:
        """A channel's messages oldest first, deleted ones left out."""
        found = [m for m in self.messages.get(channel, {}).values() if not m.deleted]
        return sorted(found, key=lambda m: m.ts)

    def message_to_slack(
        self, message: Message, *, with_channel: bool = False, with_metadata: bool = False
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": "message",
            "ts": message.ts,
            "user": message.user,
            "text": message.text,
        }
        if with_channel:
            body["channel"] = message.channel
        if message.subtype:
            body["subtype"] = message.subtype
        if message.bot_id:
            body["bot_id"] = message.bot_id
            body["app_id"] = self.app_id
        else:
            body["client_msg_id"] = message.client_msg_id
        body["team"] = self.team_id
        if message.file_ids:
            body["files"] = [self.files[file_id].to_slack() for file_id in message.file_ids]
            body["upload"] = message.bot_id is not None
            body["display_as_bot"] = False
        if message.edited_ts:
            body["edited"] = {"user": message.user, "ts": message.edited_ts}
        if message.thread_ts:
            body["thread_ts"] = message.thread_ts
            if message.is_reply:
                parent = self.messages[message.channel].get(message.thread_ts)
                if parent is not None:
                    body["parent_user_id"] = parent.user
        replies = [ts for ts in message.reply_ts if self.message(message.channel, ts) is not None]
        if replies:
            body["thread_ts"] = message.ts
            body["reply_count"] = len(replies)
            body["reply_users"] = sorted({self.messages[message.channel][ts].user for ts in replies})
            body["reply_users_count"] = len(body["reply_users"])
            body["latest_reply"] = max(replies)
        if message.client_msg_id is None:
            body.pop("client_msg_id", None)
        if with_metadata and message.metadata is not None:
            body["metadata"] = message.metadata
        return body
