"""Activities of SlackConversationWorkflow: thin wrappers over the Web API and the session API."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from temporalio import activity
from temporalio.exceptions import ApplicationError

from tempi.activities.sandbox import SandboxError
from tempi.activities.sandbox.user_container import attach_user_container
from tempi.activities.slack.channel_log import LoggedMessage, append_new, iso_date, log_path
from tempi.activities.slack.channel_settings import apply_channel_settings
from tempi.activities.slack.conversation_state import SavedConversation, save
from tempi.activities.slack.directory import SlackDirectory
from tempi.activities.slack.idempotent_post import find_posted, heartbeating, post_key, post_metadata
from tempi.activities.slack.mom_prompt import build_mom_prompt, local_zone_name
from tempi.activities.slack.prompt_input import lines_before_thread, load_images, unseen_log_lines
from tempi.activities.slack.run_progress import summarize
from tempi.activities.slack.web_client import web_client
from tempi.agent.session_entries import SessionHeader
from tempi.client.forking import iso_now
from tempi.client.options import SessionOptions
from tempi.client.service import SessionService
from tempi.client.session import SessionClient
from tempi.workflows.slack_attachments import attachments_seen_from
from tempi.workflows.slack_types import (
    SLACK_ABORT,
    SLACK_CLOSE,
    SLACK_DELETE,
    SLACK_LOG_BOT,
    SLACK_OPEN_SESSION,
    SLACK_POST,
    SLACK_PROMPT,
    SLACK_STEER,
    SLACK_UPDATE,
    SLACK_UPLOAD,
    SLACK_WAIT_RUN,
    BotLogRequest,
    CloseRequest,
    DeleteRequest,
    OpenSessionRequest,
    PostRequest,
    PromptSession,
    RunProgress,
    SteerSession,
    UpdateRequest,
    UploadRequest,
    WaitRun,
)

T = TypeVar("T")

POLL_S = 0.25
# Events that arrive together (a tool's end and the next message) go in one summary.
GATHER_S = 0.3
END_OF_LOG = 2**62
# Slack errors worth another attempt; the rest (channel_not_found, not_in_channel, ...) are final.
_TRANSIENT = {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}


async def _slack(call: Awaitable[T]) -> T:
    try:
        return await call
    except SlackApiError as err:
        code = str(err.response.get("error") or "unknown_error")
        raise ApplicationError(
            f"Slack answered {code}", type="SlackApiError", non_retryable=code not in _TRANSIENT
        ) from err


class SlackActivities:
    def __init__(
        self, service: SessionService, options: SessionOptions, web: AsyncWebClient | None = None
    ) -> None:
        self.service = service
        self.options = options
        self._web = web
        self._labels: dict[str, tuple[str, str, str]] = {}
        self.directory = SlackDirectory()

    @property
    def web(self) -> AsyncWebClient:
        if self._web is None:
            self._web = web_client()
        return self._web

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.close,
            self.post,
            self.update,
            self.delete,
            self.upload,
            self.open_session,
            self.prompt,
            self.wait_run,
            self.abort,
            self.steer,
            self.log_bot,
        ]

    @activity.defn(name=SLACK_CLOSE)
    async def close(self, req: CloseRequest) -> None:
        """An idle conversation's session stops (its file stays: the next run continues it)."""
        await asyncio.to_thread(
            save, Path(req.state_file), SavedConversation(synced_ts=req.synced_ts, seen=req.seen)
        )
        if req.session_id is None:
            return
        session = self.service.get(req.session_id)
        if not await session.is_running():
            return
        await session.shutdown()
        # The next run resumes the file: the old workflow must be gone, not joined.
        while await session.is_running():
            activity.heartbeat()
            await asyncio.sleep(POLL_S)

    @activity.defn(name=SLACK_POST)
    async def post(self, req: PostRequest) -> str:
        info = activity.info()
        key = post_key(info)
        if info.attempt > 1:
            # The attempt before may have posted with its answer lost: that message is this post.
            found = await heartbeating(
                _slack(
                    find_posted(self.web, req.channel, req.thread_ts, key, info.scheduled_time.timestamp())
                )
            )
            if found is not None:
                return found
        answer = await heartbeating(
            _slack(
                self.web.chat_postMessage(
                    channel=req.channel, text=req.text, thread_ts=req.thread_ts, metadata=post_metadata(key)
                )
            )
        )
        return str(answer["ts"])

    @activity.defn(name=SLACK_UPDATE)
    async def update(self, req: UpdateRequest) -> None:
        await heartbeating(_slack(self.web.chat_update(channel=req.channel, ts=req.ts, text=req.text)))

    @activity.defn(name=SLACK_DELETE)
    async def delete(self, req: DeleteRequest) -> None:
        try:
            await heartbeating(_slack(self.web.chat_delete(channel=req.channel, ts=req.ts)))
        except ApplicationError as err:
            if "message_not_found" not in str(err):
                raise
            # A retried delete whose first attempt went through.

    @activity.defn(name=SLACK_UPLOAD)
    async def upload(self, req: UploadRequest) -> None:
        """Slack's three-step upload of a file the `attach` tool named; the bot token stays here."""
        path = Path(req.path).resolve()
        if not path.is_relative_to(Path(req.working_dir).resolve()):
            raise ApplicationError(
                f"{req.path} is outside the working directory; only files in it are shared",
                type="AttachRefused",
                non_retryable=True,
            )
        try:
            content = path.read_bytes()
        except OSError as err:
            raise ApplicationError(f"Cannot read {req.path}: {err.strerror}", non_retryable=True) from err
        await heartbeating(
            _slack(
                self.web.files_upload_v2(
                    channel=req.channel,
                    thread_ts=req.thread_ts,
                    file=content,
                    filename=path.name,
                    title=req.title or path.name,
                )
            )
        )

    async def _session(self, context_file: str) -> SessionClient:
        """The session of the conversation's pi file: running, continued, or new."""
        path = Path(context_file)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            header = SessionHeader(id=str(uuid.uuid4()), timestamp=iso_now(), cwd=self.options.cwd)
            self.service.store.create(path, header)
        return await self.service.resume(path, self.options)

    @activity.defn(name=SLACK_OPEN_SESSION)
    async def open_session(self, req: OpenSessionRequest) -> str:
        return (await self._session(req.context_file)).session_id

    @activity.defn(name=SLACK_PROMPT)
    async def prompt(self, req: PromptSession) -> int:
        """Prompt the session; returns the event offset its run starts from."""
        session = await self._session(req.context_file)
        if req.settings_file:
            await apply_channel_settings(session, Path(req.settings_file))
        offset = (await session.read_events(END_OF_LOG)).next_offset
        tool_dir = await self._tool_dir(req.working_dir) if req.working_dir else None
        if req.working_dir and req.channel:
            await session.set_system_prompt(await self._mom_prompt(req.working_dir, req.channel, tool_dir))
        text = req.text
        if tool_dir and req.working_dir and tool_dir != req.working_dir:
            text = attachments_seen_from(text, req.working_dir, tool_dir)
        # mom adds each unseen log line to the session as a message of its own.
        before = unseen_log_lines(req.sync) if req.sync is not None else []
        if await self._thread_begins(session, req):
            assert req.sync is not None
            before = lines_before_thread(req.sync) + before
        await session.prompt(text, images=load_images(req.images), before=before)
        return offset

    async def _thread_begins(self, session: SessionClient, req: PromptSession) -> bool:
        """Whether this prompt is the first of a thread's session, which mom's channel
        session would have shown what the channel said before (a thread that continues
        another conversation has that conversation's messages instead)."""
        sync = req.sync
        if sync is None or sync.thread_ts is None or sync.after_ts:
            return False
        return (await session.state()).message_count == 0

    async def _tool_dir(self, working_dir: str) -> str:
        """Where the tools see the working directory: its mount in the user's container."""
        name = self.options.sandbox_container
        if self.options.sandbox != "container" or not name:
            return working_dir
        try:
            return (await attach_user_container(name, working_dir)).workdir
        except SandboxError:
            return working_dir  # the tool calls themselves say what is wrong

    async def _mom_prompt(self, working_dir: str, channel: str, tool_dir: str | None) -> str:
        await self.directory.refresh(self.web)
        return build_mom_prompt(
            working_dir=Path(working_dir),
            channel=channel,
            sandbox=self.options.sandbox,
            cwd=self.options.cwd,
            timezone=local_zone_name(),
            users=self.directory.users,
            channels=self.directory.channels,
            workspace_path=tool_dir,
        )

    @activity.defn(name=SLACK_WAIT_RUN)
    async def wait_run(self, req: WaitRun) -> RunProgress:
        session = self.service.get(req.session_id)
        deadline = time.monotonic() + req.max_wait_s
        while True:
            activity.heartbeat()
            page = await session.read_events(req.offset)
            if page.events:
                # When each event was first seen: a tool's end, to time the tool.
                first_seen, seen = time.time(), len(page.events)
                await asyncio.sleep(GATHER_S)
                page = await session.read_events(req.offset)
                now = time.time()
                seen_at = [first_seen if i < seen else now for i in range(len(page.events))]
                progress = summarize(page.events, page.next_offset, self._labels, seen_at)
                if progress.done:
                    progress.context_window = (await session.state()).model.context_window
                return progress
            if time.monotonic() >= deadline:
                return RunProgress(next_offset=page.next_offset)
            await asyncio.sleep(POLL_S)

    @activity.defn(name=SLACK_ABORT)
    async def abort(self, session_id: str) -> None:
        await self.service.get(session_id).abort()

    @activity.defn(name=SLACK_LOG_BOT)
    async def log_bot(self, req: BotLogRequest) -> None:
        """The bot's answer in the channel's log.jsonl, as mom logs what it posts."""
        now = iso_date(time.time())
        entries = [
            LoggedMessage(date=now, ts=req.ts, thread_ts=req.thread_ts, user="bot", text=text, is_bot=True)
            for text in req.texts
        ]
        await asyncio.to_thread(append_new, log_path(req.working_dir, req.channel), entries)

    @activity.defn(name=SLACK_STEER)
    async def steer(self, req: SteerSession) -> None:
        text = req.text
        if req.working_dir:
            tool_dir = await self._tool_dir(req.working_dir)
            if tool_dir != req.working_dir:
                text = attachments_seen_from(text, req.working_dir, tool_dir)
        await self.service.get(req.session_id).steer(text, images=load_images(req.images))
