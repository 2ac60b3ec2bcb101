"""The Slack side of `tempi slack`: Socket Mode in, one signal-with-start per accepted message.

Every envelope is acked at once; the conversation workflow, not this process, decides
what a message does, and it drops a message it has already seen, so a redelivered
envelope or a second gateway never starts a second run."""

from __future__ import annotations

import asyncio
import datetime
import logging
import sys
import time
from pathlib import Path
from typing import Any

from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from tempi.activities.slack.channel_log import LoggedAttachment
from tempi.activities.slack.conversation_state import idle_close_seconds, with_saved_state
from tempi.activities.slack.web_client import app_token, bot_token
from tempi.slack.accept import Accepted, accept, malformed, thread_reply
from tempi.slack.access import Access
from tempi.slack.channel_recorder import ChannelRecorder
from tempi.slack.event_watcher import EventWatcher
from tempi.slack.thread_fork import fork_into_thread
from tempi.workflows.slack_conversation_workflow import SlackConversationWorkflow
from tempi.workflows.slack_text import is_stop
from tempi.workflows.slack_types import (
    RUNNING_FOR,
    ContextMode,
    SlackConversationInput,
    SlackMessage,
    conversation_workflow_id,
    slack_task_queue,
)

log = logging.getLogger("tempi.slack")


def mom_stamp(ts: str) -> str:
    """A message's time as mom writes it in prompts: `YYYY-MM-DD HH:MM:SS+HH:MM`, local zone."""
    when = datetime.datetime.fromtimestamp(float(ts)).astimezone()
    return when.isoformat(sep=" ", timespec="seconds")


class SlackGateway:
    def __init__(
        self,
        temporal: Client,
        web: AsyncWebClient,
        working_dir: str,
        context_mode: ContextMode,
        access: Access | None = None,
    ) -> None:
        self.temporal = temporal
        self.web = web
        self.working_dir = working_dir
        self.context_mode = context_mode
        self.bot_user_id = ""
        self.bot_name = "mom"
        self.user_names: dict[str, str] = {}
        self.display_names: dict[str, str] = {}
        self.started_at = time.time()
        self.recorder = ChannelRecorder(web, working_dir, bot_token(), self._names)
        self.access = access or Access()
        self.channel_names: dict[str, str | None] = {}
        self.team_url = "https://slack.com/"

    async def run(self) -> None:
        auth = await self.web.auth_test()
        self.bot_user_id = str(auth["user_id"])
        self.bot_name = str(auth.get("user") or self.bot_name)
        self.team_url = str(auth.get("url") or "https://slack.com/")
        await self._load_users()
        self.recorder.bot_user_id, self.recorder.bot_name = self.bot_user_id, self.bot_name
        await self.recorder.backfill()
        socket = SocketModeClient(app_token=app_token(), web_client=self.web)
        socket.socket_mode_request_listeners.append(self._on_request)  # type: ignore[arg-type]
        await socket.connect()
        print(
            f"tempi slack: connected as @{self.bot_name} ({self.bot_user_id}); answering in {self.working_dir}",
            file=sys.stderr,
            flush=True,
        )
        watcher = EventWatcher(
            self.temporal, self.working_dir, self.bot_name, self.started_at, self._event_channel_allowed
        )
        try:
            await watcher.run()
        finally:
            await socket.close()

    async def _load_users(self) -> None:
        cursor: str | None = None
        while True:
            page = await self.web.users_list(limit=200, cursor=cursor)
            for member in page.get("members") or []:
                if not member.get("deleted"):
                    self.user_names[member["id"]] = member.get("name") or member["id"]
                    self.display_names[member["id"]] = (
                        member.get("real_name") or self.user_names[member["id"]]
                    )
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return

    async def _user_name(self, user: str) -> str:
        if user not in self.user_names:
            # Someone who joined since the last listing.
            try:
                await self._load_users()
            except Exception:
                log.exception("could not list Slack users")
        return self.user_names.get(user, user)

    async def _names(self, user: str) -> tuple[str | None, str | None]:
        await self._user_name(user)
        return self.user_names.get(user), self.display_names.get(user)

    async def _on_request(self, client: SocketModeClient, req: SocketModeRequest) -> None:
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
        if req.type != "events_api":
            return
        event: dict[str, Any] = (req.payload or {}).get("event") or {}
        if (problem := malformed(event)) is not None:
            log.warning("ignoring a %s event: %s", str(event.get("type"))[:40], problem)
            return
        try:
            attachments = await self.recorder.record_event(event) if await self._kept(event) else []
        except Exception:
            log.exception("could not write a Slack message to the channel's log")
            attachments = []
        accepted = accept(event, self.bot_user_id)
        steer = False
        if accepted is None and self.context_mode == "thread":
            accepted = thread_reply(event, self.bot_user_id)
            steer = True
        if accepted is None:
            return
        if not await self._allowed(accepted):
            return
        if float(accepted.ts or 0) < self.started_at:
            # Slack replays recent events on reconnect; like mom, answer only what came after the start.
            log.info("not answering %s in %s: it predates this gateway", accepted.ts, accepted.channel)
            return
        try:
            if self._top_level_stop(accepted) and not steer:
                await self.stop_threads(accepted)
                return
            await (self.steer(accepted, attachments) if steer else self.dispatch(accepted, attachments))
        except Exception:
            log.exception("could not hand a Slack message to its conversation workflow")

    async def _channel_name(self, channel: str) -> str | None:
        if channel not in self.channel_names:
            try:
                info = await self.web.conversations_info(channel=channel)
                self.channel_names[channel] = (info.get("channel") or {}).get("name")
            except Exception:
                log.exception("could not look up channel %s", channel)
                return None
        return self.channel_names[channel]

    async def _event_channel_allowed(self, channel: str) -> bool:
        """An events-directory file (the model's to write) may wake the bot only where people may."""
        return not self.access.channels or self.access.channel_allowed(
            channel, await self._channel_name(channel)
        )

    async def _kept(self, event: dict[str, Any]) -> bool:
        """Whether the channel's messages go to its log: with --allow-channels, the bot keeps
        nothing of the channels it was told to stay out of."""
        channel = str(event.get("channel") or "")
        if not self.access.channels or not channel:
            return True
        return self.access.channel_allowed(channel, await self._channel_name(channel))

    async def _allowed(self, msg: Accepted) -> bool:
        name = await self._user_name(msg.user)
        if not self.access.user_allowed(msg.user, name):
            log.info("ignoring %s (%s) in %s: not in --allow-users", name, msg.user, msg.channel)
            return False
        if self.access.channels and not self.access.channel_allowed(
            msg.channel, await self._channel_name(msg.channel)
        ):
            log.info("ignoring a message in %s: not in --allow-channels", msg.channel)
            return False
        return True

    async def _message(
        self, msg: Accepted, *, steer: bool = False, attachments: list[LoggedAttachment] | None = None
    ) -> SlackMessage:
        name = await self._user_name(msg.user)
        return SlackMessage(
            channel=msg.channel,
            ts=msg.ts,
            thread_ts=msg.thread_ts,
            user=msg.user,
            user_name=name,
            text=msg.text,
            is_dm=msg.is_dm,
            stamp=mom_stamp(msg.ts),
            steer=steer,
            admin=self.access.is_admin(msg.user, name),
            attachments=[a.local for a in attachments or []],
        )

    async def steer(self, msg: Accepted, attachments: list[LoggedAttachment] | None = None) -> None:
        """A plain thread reply goes to that thread's conversation only if one exists: it
        steers the run going there, or follows up when none is; it never starts a conversation."""
        handle = self.temporal.get_workflow_handle(
            conversation_workflow_id(self.working_dir, msg.channel, msg.thread_ts)
        )
        try:
            await handle.signal("message", await self._message(msg, steer=True, attachments=attachments))
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            if self._under_bot_message(msg) or self._closed_thread(msg):
                # The bot's thread after all: under its event report the first reply starts
                # it; in a thread whose conversation closed idle, a reply opens it again.
                await self.dispatch(msg, attachments)

    def _closed_thread(self, msg: Accepted) -> bool:
        """A thread the bot has a session for, whose conversation is not running."""
        if msg.thread_ts is None:
            return False
        thread = SlackConversationInput(
            working_dir=self.working_dir, channel=msg.channel, root_ts=msg.thread_ts
        )
        return Path(thread.context_file()).exists()

    def _top_level_stop(self, msg: Accepted) -> bool:
        """`@bot stop` at a channel's top level in thread mode, where no run of its own goes."""
        return self.context_mode == "thread" and not msg.is_dm and msg.thread_ts is None and is_stop(msg.text)

    async def _running_threads(self, channel: str) -> dict[str, list[str]]:
        """The channel's threads with a run going, each with whom the run is for."""
        prefix = conversation_workflow_id(self.working_dir, channel, None) + "-"
        query = f'TaskQueue = "{slack_task_queue(self.working_dir)}" AND ExecutionStatus = "Running"'
        running: dict[str, list[str]] = {}
        async for execution in self.temporal.list_workflows(query):
            if execution.id.startswith(prefix):
                owners = (await execution.memo()).get(RUNNING_FOR)
                if isinstance(owners, list) and owners:
                    running[execution.id.removeprefix(prefix)] = [str(o) for o in owners]
        return running

    async def stop_threads(self, msg: Accepted) -> None:
        """Stop the sender's runs in the channel's threads; with none, say which threads run."""
        running = await self._running_threads(msg.channel)
        mine = [root for root, owners in running.items() if msg.user in owners]
        for root in mine:
            handle = self.temporal.get_workflow_handle(
                conversation_workflow_id(self.working_dir, msg.channel, root)
            )
            await handle.signal("message", await self._message(msg))
        if mine:
            return
        if not running:
            text = "_Nothing running_"
        else:
            threads = ", ".join(
                f"{self._thread_link(msg.channel, root)} (for {' '.join(f'<@{u}>' for u in owners)})"
                for root, owners in sorted(running.items())
            )
            text = (
                f"_Nothing of yours is running. Running here: {threads}. "
                f"Say `@{self.bot_name} stop` in a thread to stop its run._"
            )
        await self.web.chat_postMessage(channel=msg.channel, text=text, thread_ts=msg.ts)

    def _thread_link(self, channel: str, root: str) -> str:
        return f"<{self.team_url}archives/{channel}/p{root.replace('.', '')}|this thread>"

    def _under_bot_message(self, msg: Accepted) -> bool:
        return msg.thread_ts is not None and msg.thread_ts != msg.ts and msg.parent_user == self.bot_user_id

    def _continue_in_thread(self, channel: str, root: str) -> None:
        """A thread under one of the bot's top-level messages (those come from the channel's
        own conversation: a DM's, or the events') starts from that conversation's session."""
        channel_conversation = SlackConversationInput(
            working_dir=self.working_dir, channel=channel, context_mode="channel"
        )
        thread = SlackConversationInput(working_dir=self.working_dir, channel=channel, root_ts=root)
        if fork_into_thread(Path(channel_conversation.context_file()), Path(thread.context_file())):
            log.info("thread %s in %s continues the channel's conversation", root, channel)

    async def dispatch(self, msg: Accepted, attachments: list[LoggedAttachment] | None = None) -> None:
        # A DM is one conversation, as in mom, unless someone replies in one of its threads;
        # otherwise every DM line would start a session that knows nothing of the last.
        threaded = self.context_mode == "thread" and not (msg.is_dm and msg.thread_ts is None)
        root = (msg.thread_ts or msg.ts) if threaded else None
        signal = await self._message(msg, attachments=attachments)
        if root is not None and self._under_bot_message(msg):
            await asyncio.to_thread(self._continue_in_thread, msg.channel, root)
        inp = SlackConversationInput(
            working_dir=self.working_dir,
            channel=msg.channel,
            root_ts=root,
            context_mode="thread" if threaded else "channel",
            bot_name=self.bot_name,
            idle_close_s=idle_close_seconds(),
        )
        await self.temporal.start_workflow(
            SlackConversationWorkflow.run,
            # A conversation that closed idle starts again knowing what it had seen.
            await asyncio.to_thread(with_saved_state, inp),
            id=conversation_workflow_id(self.working_dir, msg.channel, root),
            task_queue=slack_task_queue(self.working_dir),
            start_signal="message",
            start_signal_args=[signal],
        )
