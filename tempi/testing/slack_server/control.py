"""The control API: act as the workspace's people, break things on demand, read what the bot did.

`SlackControl` holds the whole scripted workspace; `ScriptedSlackServer` serves it over HTTP.
"""

from __future__ import annotations

import dataclasses
import uuid

from tempi.testing.slack_server.events import event_callback, user_message_events
from tempi.testing.slack_server.files import FileService
from tempi.testing.slack_server.holds import Hold, Holds, Match
from tempi.testing.slack_server.methods import MAX_TEXT, SlackMethods
from tempi.testing.slack_server.outages import Outages
from tempi.testing.slack_server.rate_limits import RateLimits
from tempi.testing.slack_server.records import ApiCall, BotAction, BotMessage
from tempi.testing.slack_server.socket_mode import Delivery, SocketModeHub
from tempi.testing.slack_server.web_api import WebApi
from tempi.testing.slack_server.workspace import Message, Workspace

DEFAULT_BOT_TOKEN = "xoxb-0000-scripted-bot-token"
DEFAULT_APP_TOKEN = "xapp-1-A0TEMPIAPP-scripted-app-token"


@dataclasses.dataclass
class Attachment:
    """A file a user attaches to a message."""

    name: str
    content: bytes
    mimetype: str | None = None


class SlackControl:
    """One bot's workspace and the test's handle on it."""

    def __init__(
        self,
        bot_token: str = DEFAULT_BOT_TOKEN,
        app_token: str = DEFAULT_APP_TOKEN,
        bot_name: str = "mom",
        ack_timeout: float = 3.0,
        echo_bot_events: bool = True,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.workspace = Workspace(bot_name=bot_name)
        self.hub = SocketModeHub(self.workspace.app_id, ack_timeout=ack_timeout)
        self.rate_limits = RateLimits()
        self.outages = Outages()
        self.holds = Holds()
        self._methods = SlackMethods(self.workspace, self.hub, echo_bot_events=echo_bot_events)
        self._methods.socket_url = self._socket_url
        self._files = FileService(self._methods, lambda: self.bot_token)
        self._files.base_url = lambda: self.base_url
        table = self._methods.table()
        table["files.getUploadURLExternal"] = self._files.get_upload_url
        table["files.completeUploadExternal"] = self._files.complete_upload
        self._web = WebApi(table, bot_token, app_token, self.rate_limits, self.outages, self.holds)

    @property
    def base_url(self) -> str:
        raise RuntimeError("the scripted Slack workspace is not served; use ScriptedSlackServer")

    @property
    def api_url(self) -> str:
        """The Web API base URL, with the trailing slash slack_sdk's `base_url` wants."""
        return f"{self.base_url}/api/"

    def _socket_url(self, ticket: str) -> str:
        raise RuntimeError("the scripted Slack workspace is not served; use ScriptedSlackServer")

    # -- acting as the workspace -------------------------------------------------------

    @property
    def bot_user_id(self) -> str:
        return self.workspace.bot_user_id

    def add_user(
        self, name: str, real_name: str | None = None, display_name: str | None = None, deleted: bool = False
    ) -> str:
        return self.workspace.add_user(name, real_name, display_name, deleted).id

    def add_channel(
        self,
        name: str,
        members: list[str] | None = None,
        private: bool = False,
        bot_is_member: bool = True,
        archived: bool = False,
    ) -> str:
        return self.workspace.add_channel(name, members, private, bot_is_member, archived).id

    def open_dm(self, user: str) -> str:
        return self.workspace.open_dm(user).id

    def user_says(
        self,
        user: str,
        channel: str,
        text: str,
        thread_ts: str | None = None,
        files: list[Attachment] | None = None,
    ) -> str:
        """Post as a human and deliver the events Slack emits for it; returns the message ts."""
        ws = self.workspace
        if user not in ws.users:
            raise KeyError(f"no user {user}; make one with add_user()")
        if channel not in ws.channels:
            raise KeyError(f"no channel {channel}; make one with add_channel() or open_dm()")
        if thread_ts is not None:
            parent = ws.message(channel, thread_ts)
            if parent is None:
                raise KeyError(f"no message {thread_ts} in {channel} to reply to")
            thread_ts = parent.thread_ts or parent.ts
        stored = [self._files.store(f.name, f.content, user, f.mimetype) for f in files or []]
        message = ws.add_message(
            Message(
                channel=channel,
                ts=ws.clock.next(),
                user=user,
                text=text[:MAX_TEXT],
                thread_ts=thread_ts,
                subtype="file_share" if stored else None,
                file_ids=[f.id for f in stored],
                client_msg_id=str(uuid.uuid4()),
            )
        )
        for event in user_message_events(ws, message):
            self.hub.publish(event_callback(ws, event))
        return message.ts

    def rate_limit(self, method: str, times: int = 1, retry_after: int = 1) -> None:
        """The next `times` calls of `method` get 429 with `Retry-After: retry_after`."""
        self.rate_limits.limit(method, times, retry_after)

    def fail(self, method: str, times: int = 1, status: int = 503) -> None:
        """The next `times` calls of `method` get HTTP `status` (5xx), as during a Slack incident."""
        self.outages.fail(method, times, status)

    def hold(self, method: str, match: Match | None = None, *, applied: bool = True) -> Hold:
        """The next call of `method` (that `match` accepts) stays in flight until `release()`:
        done in Slack but unanswered (`applied`), or lost before Slack saw it."""
        return self.holds.add(method, match or (lambda args: True), applied)

    def revoke(self, token: str) -> None:
        """From now on the token gets `token_revoked`, as after an uninstall or a rotation."""
        self._web.revoked.add(token)

    async def disconnect(self, reason: str = "refresh_requested", close_after: float = 0.5) -> int:
        """Send Slack's `disconnect` to every connection and close them `close_after` s later."""
        return await self.hub.disconnect(reason, close_after)

    async def wait_for_connections(self, count: int = 1, timeout: float = 10.0) -> None:
        await self.hub.wait_for_connections(count, timeout)

    async def idle(self, timeout: float = 10.0) -> None:
        """Wait until every event is acked or retried out."""
        await self.hub.idle(timeout)

    # -- reading back ------------------------------------------------------------------

    @property
    def actions(self) -> list[BotAction]:
        return list(self._methods.actions)

    def bot_messages(self, channel: str | None = None) -> list[BotMessage]:
        """Every message the bot posted (deleted ones too), oldest first, with its edits."""
        ws = self.workspace
        found = [
            m
            for chan, messages in ws.messages.items()
            if channel in (None, chan)
            for m in messages.values()
            if m.user == ws.bot_user_id
        ]
        return [
            BotMessage(
                channel=m.channel,
                ts=m.ts,
                thread_ts=m.thread_ts,
                texts=list(m.texts),
                deleted=m.deleted,
                file_ids=list(m.file_ids),
            )
            for m in sorted(found, key=lambda m: m.ts)
        ]

    def file_content(self, file_id: str) -> bytes | None:
        stored = self.workspace.files.get(file_id)
        return None if stored is None else stored.content

    def calls(self, method: str | None = None) -> list[ApiCall]:
        return [call for call in self._web.calls if method in (None, call.method)]

    @property
    def deliveries(self) -> list[Delivery]:
        return list(self.hub.deliveries)

    @property
    def acks(self) -> int:
        """Envelopes the app acknowledged."""
        return sum(1 for d in self.hub.deliveries if d.acked)

    @property
    def redeliveries(self) -> int:
        """Envelopes sent again because an earlier one for the same event was not acked in time."""
        return sum(1 for d in self.hub.deliveries if d.retry_attempt > 0)

    @property
    def connections_opened(self) -> int:
        return self.hub.connections_opened
