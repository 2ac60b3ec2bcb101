"""One Slack conversation (a thread, or a whole channel) driving one agent session, as pi's
mom does: a main message per run edited in place, tool details in the thread, a busy
reply while a run goes, `stop` to abort. Deterministic: Slack and the session are reached
through activities only."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from tempi.workflows.slack_attachments import with_attachments
from tempi.workflows.slack_text import (
    MAIN_LIMIT,
    SLACK_MAX,
    THREAD_LIMIT,
    cut,
    is_silent,
    is_stop,
    main_answer,
    prompt_text,
    split_for_slack,
    tool_detail,
    usage_summary,
)
from tempi.workflows.slack_types import (
    RUNNING_FOR,
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
    FileUpload,
    LogSync,
    OpenSessionRequest,
    PostRequest,
    PromptSession,
    RunProgress,
    RunState,
    SlackConversationInput,
    SlackMessage,
    SteerSession,
    ThreadCopy,
    ToolStarted,
    UpdateRequest,
    UploadRequest,
    WaitRun,
    is_slack_ts,
)

THINKING = "_Thinking_"
EDIT_INTERVAL_S = 1.0
SEEN_KEPT = 500
# mom drops a channel's events beyond five waiting ones rather than pile up wake-ups.
MAX_QUEUED_EVENTS = 5
# Runs hand off to a fresh history well before Temporal's limits.
HISTORY_EVENTS_BUDGET = 5_000
# Patch: no busy notice for events, one per person per run (was one per queued message).
QUIET_QUEUE = "slack-quiet-queue"
# Patch: the memo names who the running run is for.
RUN_MEMO = "slack-run-memo"
# Patch: in thread mode a run's details are one message, edited, and its text is not copied
# under the main message that shows it (issue 37, item 5).
FOLDED_DETAILS = "slack-folded-details"
# Patch: a tool's thread entry keeps its label and arguments after a gateway restart (item 8).
KEPT_TOOL_LABELS = "slack-kept-tool-labels"
# Patch: a conversation idle past `idle_close_s` closes, its session too (item 10).
IDLE_CLOSE = "slack-idle-close"
# Patch: main-message lines in the order they happened, tool errors echoed there, tool
# durations from the session's own start time (item 11).
ORDERED_LINES = "slack-ordered-lines"

_SLACK_TIMEOUT = timedelta(seconds=60)
# Slack calls heartbeat while they wait: one lost with a dead gateway is retried within seconds
# (a post then finds the message its lost attempt made), not after the minute of its timeout.
_SLACK_HEARTBEAT = timedelta(seconds=4)
_SLACK_RETRY = RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1))


@workflow.defn(name="SlackConversationWorkflow")
class SlackConversationWorkflow:
    @workflow.init
    def __init__(self, inp: SlackConversationInput) -> None:
        self.inp = inp
        self.state = inp.state
        self.tool_started_at: dict[str, float] = {}
        self.tool_started: dict[str, ToolStarted] = {}
        self.last_edit_at = -EDIT_INTERVAL_S
        self.details_edit_at = -EDIT_INTERVAL_S

    # --- handlers ------------------------------------------------------------------

    @workflow.signal
    async def message(self, msg: SlackMessage) -> None:
        key = f"{msg.channel}:{msg.ts}"
        if key in self.state.seen:
            return  # a redelivered event, or the same event from a second gateway
        self.state.seen = [*self.state.seen, key][-SEEN_KEPT:]
        if is_stop(msg.text):
            await self._quietly(self._stop(msg))
            return
        if msg.steer and self._steerable():
            await self._quietly(self._steer(msg))
            return
        if msg.event is not None and sum(m.event is not None for m in self.state.queue) >= MAX_QUEUED_EVENTS:
            workflow.logger.warning("dropping event %s: %d events already wait", msg.event, MAX_QUEUED_EVENTS)
            return
        busy = self.state.run is not None
        self.state.queue.append(msg)
        # A reply between runs follows up with a run of its own; one that came while a run
        # was only starting goes to the next run, without a busy notice it did not ask for.
        if busy and not msg.steer and self._busy_notice_due(msg):
            cancel = "`stop`" if msg.is_dm else f"`@{self.inp.bot_name} stop`"
            await self._quietly(
                self._post(f"_Already working. Say {cancel} to cancel._", self._busy_notice_thread(msg))
            )

    def _busy_notice_due(self, msg: SlackMessage) -> bool:
        """Events wait silently, as in mom; a person hears once per run that the bot is busy
        (a burst of messages must not fill the channel with notices)."""
        if not workflow.patched(QUIET_QUEUE):
            return True
        run = self.state.run
        if msg.event is not None or run is None or msg.user in run.busy_noticed:
            return False
        run.busy_noticed.append(msg.user)
        return True

    def _busy_notice_thread(self, msg: SlackMessage) -> str | None:
        """The notice goes in the sender's thread (at a DM's top level, as mom answers there)."""
        if self.inp.context_mode == "thread" or msg.is_dm or not workflow.patched(QUIET_QUEUE):
            return self._thread_of(msg)
        return msg.thread_ts or msg.ts

    @workflow.query
    def get_state(self) -> SlackConversationInput:
        return self.inp.model_copy(update={"state": self.state})

    def _steerable(self) -> bool:
        """Whether a run has reached its session, so a reply can join it between its steps."""
        return (
            self.state.run is not None
            and self.state.run.offset is not None
            and not self.state.run.session_done
            and self.state.session_id is not None
        )

    async def _steer(self, msg: SlackMessage) -> None:
        assert self.state.session_id is not None
        text, images = with_attachments(prompt_text([msg]), [msg], self.inp.working_dir)
        await workflow.execute_activity(
            SLACK_STEER,
            SteerSession(
                session_id=self.state.session_id,
                text=text,
                images=images,
                working_dir=self.inp.working_dir,
            ),
            start_to_close_timeout=_SLACK_TIMEOUT,
            retry_policy=_SLACK_RETRY,
        )
        # The session has the reply now: the next prompt must not bring its log line again.
        self._synced_up_to(msg.ts)

    async def _stop(self, msg: SlackMessage) -> None:
        thread = self._thread_of(msg)
        if self.state.run is None or self.state.session_id is None:
            await self._post("_Nothing running_", thread)
            return
        owners = [m.user for m in self.state.run.messages if m.event is None]
        if not msg.admin and msg.user not in owners:
            who = "".join(f"<@{u}> or " for u in dict.fromkeys(owners))
            await self._post(f"_Only {who}an admin can stop this run._", thread)
            return
        if self.state.stopping_ts is None:
            self.state.stopping_ts = await self._post("_Stopping..._", thread)
        await workflow.execute_activity(
            SLACK_ABORT,
            self.state.session_id,
            start_to_close_timeout=_SLACK_TIMEOUT,
            retry_policy=_SLACK_RETRY,
        )

    # --- the run loop --------------------------------------------------------------

    @workflow.run
    async def run(self, inp: SlackConversationInput) -> None:
        while True:
            if not await self._wait_for_work():
                if await self._close():
                    return
                continue
            if self.state.run is None:
                self.state.run = RunState(messages=self.state.queue)
                self.state.queue = []
                self._show_running(self.state.run)
            try:
                await self._do_run(self.state.run)
            except ActivityError as err:
                await self._report_failure(self.state.run, err)
            self.state.run = None
            self._show_running(None)
            if self.state.stopping_ts is not None:
                await self._quietly(self._update(self.state.stopping_ts, "_Stopped_"))
                self.state.stopping_ts = None
            if self._history_too_long() and not self.state.queue:
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not self.state.queue and self.state.run is None:
                    workflow.continue_as_new(self.inp.model_copy(update={"state": self.state}))

    def _has_work(self) -> bool:
        return bool(self.state.queue) or self.state.run is not None

    async def _wait_for_work(self) -> bool:
        """Wait for a message; False when the conversation stayed idle past its limit."""
        idle = self.inp.idle_close_s
        if idle <= 0 or not workflow.patched(IDLE_CLOSE):
            await workflow.wait_condition(self._has_work)
            return True
        try:
            await workflow.wait_condition(self._has_work, timeout=idle)
        except TimeoutError:
            return False
        return True

    async def _close(self) -> bool:
        """Close an idle conversation: its session stops and this workflow ends, so an idle
        thread holds nothing open. What it knew goes to a file beside the session, which
        the next message's start reads; its session continues from the file. False when a
        message came meanwhile."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        if self._has_work():
            return False
        try:
            await workflow.execute_activity(
                SLACK_CLOSE,
                CloseRequest(
                    session_id=self.state.session_id,
                    state_file=self.inp.state_file(),
                    synced_ts=self.state.synced_ts,
                    seen=self.state.seen,
                ),
                start_to_close_timeout=_SLACK_TIMEOUT,
                heartbeat_timeout=_SLACK_HEARTBEAT,
                retry_policy=_SLACK_RETRY,
            )
        except ActivityError as err:
            # Stay open (and try again after the next idle spell) rather than lose the state.
            workflow.logger.warning("could not close the idle conversation: %s", err.cause or err)
            return False
        self.state.session_id = None
        await workflow.wait_condition(workflow.all_handlers_finished)
        return not self._has_work()

    def _show_running(self, run: RunState | None) -> None:
        """Whose run goes, in the workflow's memo, so a `stop` said at the channel's top level
        can find the sender's running threads from the list of workflows."""
        if workflow.patched(RUN_MEMO):
            owners = list(dict.fromkeys(m.user for m in run.messages if m.event is None)) if run else None
            workflow.upsert_memo({RUNNING_FOR: owners or None})

    async def _report_failure(self, run: RunState, err: ActivityError) -> None:
        """A run that cannot go on says so where people look, and the conversation stays open."""
        reason = str(err.cause or err)
        workflow.logger.warning("Slack run failed: %s", reason)
        if run.main_ts is None:
            return
        await self._quietly(self._post(f"_Error: {reason[:200]}_", self.inp.reply_thread() or run.main_ts))
        await self._quietly(self._update(run.main_ts, "_Sorry, something went wrong_"))

    async def _quietly(self, call: Awaitable[object]) -> None:
        # Slack refusing a notice (after retries) must not end the conversation's workflow.
        try:
            await call
        except ActivityError as err:
            workflow.logger.warning("Slack call failed: %s", err.cause or err)

    def _history_too_long(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested() or info.get_current_history_length() > HISTORY_EVENTS_BUDGET
        )

    async def _do_run(self, run: RunState) -> None:
        last = run.messages[-1]
        if run.main_ts is None:
            first = f"_Starting event: {last.event}_" if last.event is not None else f"{THINKING} ..."
            run.main_ts = await self._post(first, self._thread_of(last))
            run.shown = first
        if self.state.session_id is None:
            self.state.session_id = await workflow.execute_activity(
                SLACK_OPEN_SESSION,
                OpenSessionRequest(context_file=self.inp.context_file()),
                result_type=str,
                start_to_close_timeout=_SLACK_TIMEOUT,
                retry_policy=_SLACK_RETRY,
            )
        session_id = self.state.session_id
        if run.offset is None:
            request = self._prompt_request(run)
            run.offset = await workflow.execute_activity(
                SLACK_PROMPT,
                request,
                result_type=int,
                start_to_close_timeout=timedelta(seconds=60),
                # A prompt that may have reached the session is not sent again.
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
            if request.sync is not None:
                self._synced_up_to(request.sync.until_ts)
        details_thread = self.inp.reply_thread() or run.main_ts
        while True:
            progress: RunProgress = await workflow.execute_activity(
                SLACK_WAIT_RUN,
                WaitRun(session_id=session_id, offset=run.offset),
                result_type=RunProgress,
                start_to_close_timeout=timedelta(seconds=30),
                heartbeat_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(maximum_attempts=20, initial_interval=timedelta(seconds=1)),
            )
            run.offset = progress.next_offset
            now = workflow.now().timestamp()
            for started in progress.started:
                self.tool_started_at[started.call_id] = now
                self.tool_started[started.call_id] = started
            if workflow.patched(ORDERED_LINES):
                run.lines.extend(progress.lines)
            else:
                run.lines.extend(f"_→ {started.label}_" for started in progress.started)
                run.lines.extend(f"_{t}_" for t in progress.thinking)
                run.lines.extend(t for t in progress.texts if t.strip())
            run.texts.extend(t for t in progress.texts if t.strip())
            if progress.final_text:
                run.final_text = progress.final_text
            run.usage = run.usage.add(progress.usage)
            run.context_tokens = progress.context_tokens or run.context_tokens
            await self._post_details(run, progress, now, details_thread)
            if progress.started or not progress.done:
                await self._show(run, cut("\n".join(run.lines) or THINKING, MAIN_LIMIT) + " ...")
            if progress.done:
                # The session's run is over while its last posts still go out: a reply now
                # would steer nothing, so it waits for a run of its own.
                run.session_done = True
                await self._finish(run, progress, details_thread)
                await self._quietly(self._log_bot(run))
                return

    async def _post_details(
        self, run: RunState, progress: RunProgress, now: float, details_thread: str | None
    ) -> None:
        """Tool details and copies of thinking and text, in the order they happened."""
        copies = list(progress.copies)
        for index, ended in enumerate(progress.ended):
            while copies and copies[0].after_tools <= index:
                await self._thread_copy(run, copies.pop(0), details_thread)
            began = self.tool_started_at.pop(ended.call_id, None)
            started = self.tool_started.pop(ended.call_id, None)
            if started is not None and not ended.label and workflow.patched(KEPT_TOOL_LABELS):
                # The gateway that saw the call start is gone; this workflow remembers it.
                ended = ended.model_copy(update={"label": started.label, "args": ended.args or started.args})
            seconds = None if began is None else now - began
            if ended.seconds is not None and workflow.patched(ORDERED_LINES):
                seconds = ended.seconds
            await self._detail(run, tool_detail(ended, seconds), details_thread)
            if ended.upload is not None:
                await self._upload(ended.upload, details_thread)
        for copy in copies:
            await self._thread_copy(run, copy, details_thread)
        await self._flush_details(run, details_thread, force=progress.done)

    def _folded(self) -> bool:
        """Thread mode keeps the people's thread readable: one details message per run."""
        return self.inp.context_mode == "thread" and workflow.patched(FOLDED_DETAILS)

    async def _detail(self, run: RunState, text: str, thread: str | None) -> None:
        """A tool detail, thinking, notice or summary: a thread post of its own (mom's layout,
        under the main message), or a part of the run's details message."""
        if not self._folded():
            run.thread_posts.append(await self._post(text, thread))
            return
        joined = f"{run.details}\n\n{text}" if run.details else text
        if run.details and len(joined) > THREAD_LIMIT:
            # This message is full: the rest goes in a new one.
            await self._flush_details(run, thread)
            run.details_ts, run.details, run.details_shown = None, "", ""
            joined = text
        run.details = cut(joined, THREAD_LIMIT)

    async def _flush_details(self, run: RunState, thread: str | None, *, force: bool = True) -> None:
        """Show the details message as it now reads; while the run goes, edits wait a second
        after the last (Slack's rate for chat.update), the run's last one goes out at once."""
        if not self._folded() or run.details == run.details_shown:
            return
        if run.details_ts is None:
            run.details_ts = await self._post(run.details, thread)
            run.thread_posts.append(run.details_ts)
        elif force or workflow.now().timestamp() - self.details_edit_at >= EDIT_INTERVAL_S:
            await self._update(run.details_ts, run.details)
        else:
            return
        run.details_shown = run.details
        self.details_edit_at = workflow.now().timestamp()

    async def _upload(self, upload: FileUpload, details_thread: str | None) -> None:
        """What `attach` named goes up from this workflow's worker, the only one with the token."""
        try:
            await workflow.execute_activity(
                SLACK_UPLOAD,
                UploadRequest(
                    channel=self.inp.channel,
                    thread_ts=self.inp.reply_thread(),
                    path=upload.path,
                    title=upload.title,
                    working_dir=self.inp.working_dir,
                ),
                start_to_close_timeout=timedelta(minutes=5),
                heartbeat_timeout=_SLACK_HEARTBEAT,
                retry_policy=_SLACK_RETRY,
            )
        except ActivityError as err:
            await self._quietly(
                self._post(f"_Error: could not share {upload.title}: {err.cause or err}_", details_thread)
            )

    async def _thread_copy(self, run: RunState, copy: ThreadCopy, thread: str | None) -> None:
        if self._folded() and copy.is_text:
            # The main message shows the text; only what it had to cut goes in the thread.
            if len(copy.text) <= SLACK_MAX:
                return
            await self._flush_details(run, thread)  # what came before it, first
            for part in split_for_slack(copy.text):
                run.thread_posts.append(await self._post(part, thread))
            return
        if self._folded():
            await self._detail(run, copy.text, thread)
            return
        for part in split_for_slack(copy.text):
            run.thread_posts.append(await self._post(part, thread))

    async def _finish(self, run: RunState, progress: RunProgress, details_thread: str | None) -> None:
        if progress.error and not progress.aborted:
            await self._detail(run, f"_Error: {progress.error[:200]}_", details_thread)
            await self._flush_details(run, details_thread)
            final = "_Sorry, something went wrong_"
        elif progress.aborted:
            final = cut("\n".join(run.lines) or "_Stopped_", MAIN_LIMIT)
        elif is_silent(run.final_text):
            await self._silence(run)
            return
        else:
            final = main_answer(run.final_text or "\n".join(run.lines) or "_(no answer)_")
        await self._show(run, final)
        if run.usage.cost_total > 0:
            summary = usage_summary(run.usage, run.context_tokens, progress.context_window)
            await self._detail(run, summary, details_thread)
            await self._flush_details(run, details_thread)

    async def _silence(self, run: RunState) -> None:
        """mom's `[SILENT]`: the run's thread posts (newest first) and its main message go away."""
        for ts in [*reversed(run.thread_posts), *([run.main_ts] if run.main_ts else [])]:
            await self._quietly(
                workflow.execute_activity(
                    SLACK_DELETE,
                    DeleteRequest(channel=self.inp.channel, ts=ts),
                    start_to_close_timeout=_SLACK_TIMEOUT,
                    heartbeat_timeout=_SLACK_HEARTBEAT,
                    retry_policy=_SLACK_RETRY,
                )
            )
        run.thread_posts = []

    async def _show(self, run: RunState, text: str) -> None:
        """Edit the run's main message, once a second at most (Slack's rate for chat.update)."""
        if text == run.shown or run.main_ts is None:
            return
        wait = self.last_edit_at + EDIT_INTERVAL_S - workflow.now().timestamp()
        if wait > 0:
            await workflow.sleep(wait)
        await self._update(run.main_ts, text)
        run.shown = text
        self.last_edit_at = workflow.now().timestamp()

    # --- the channel's log -----------------------------------------------------------

    def _prompt_request(self, run: RunState) -> PromptSession:
        text, images = with_attachments(prompt_text(run.messages), run.messages, self.inp.working_dir)
        sync = LogSync(
            log_file=f"{self.inp.working_dir}/{self.inp.channel}/log.jsonl",
            after_ts=self.state.synced_ts,
            until_ts=self._newest_ts(run),
            thread_ts=self.inp.reply_thread(),
            exclude_ts=[m.ts for m in run.messages],
        )
        return PromptSession(
            context_file=self.inp.context_file(),
            text=text,
            working_dir=self.inp.working_dir,
            channel=self.inp.channel,
            settings_file=self.inp.settings_file(),
            images=images,
            sync=sync,
        )

    def _newest_ts(self, run: RunState) -> str:
        """The newest Slack ts of the run's messages; a run an event started has none, so the
        log up to now goes along, as mom's sync does before an event's run."""
        stamps = [m.ts for m in run.messages if is_slack_ts(m.ts)]
        return max(stamps, key=float) if stamps else f"{workflow.now().timestamp():.6f}"

    def _synced_up_to(self, ts: str) -> None:
        if is_slack_ts(ts) and (not self.state.synced_ts or float(ts) > float(self.state.synced_ts)):
            self.state.synced_ts = ts

    async def _log_bot(self, run: RunState) -> None:
        texts = list(run.texts)
        if run.final_text.strip() and run.final_text not in texts[-1:]:
            texts.append(run.final_text)
        if not texts or run.main_ts is None:
            return
        await workflow.execute_activity(
            SLACK_LOG_BOT,
            BotLogRequest(
                working_dir=self.inp.working_dir,
                channel=self.inp.channel,
                ts=run.main_ts,
                thread_ts=self.inp.reply_thread(),
                texts=texts,
            ),
            start_to_close_timeout=_SLACK_TIMEOUT,
            retry_policy=_SLACK_RETRY,
        )

    # --- Slack ---------------------------------------------------------------------

    def _thread_of(self, msg: SlackMessage) -> str | None:
        if self.inp.context_mode == "thread":
            return self.inp.root_ts or msg.thread_ts or msg.ts
        return None

    async def _post(self, text: str, thread_ts: str | None) -> str:
        return await workflow.execute_activity(
            SLACK_POST,
            PostRequest(channel=self.inp.channel, text=text, thread_ts=thread_ts),
            result_type=str,
            start_to_close_timeout=_SLACK_TIMEOUT,
            heartbeat_timeout=_SLACK_HEARTBEAT,
            retry_policy=_SLACK_RETRY,
        )

    async def _update(self, ts: str, text: str) -> None:
        await workflow.execute_activity(
            SLACK_UPDATE,
            UpdateRequest(channel=self.inp.channel, ts=ts, text=text),
            start_to_close_timeout=_SLACK_TIMEOUT,
            heartbeat_timeout=_SLACK_HEARTBEAT,
            retry_policy=_SLACK_RETRY,
        )
