"""What crosses the Slack conversation workflow's boundary: its input and carried state,
the message signal, and the payloads of its activities (names included, so the workflow
never imports activity code)."""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import BaseModel, Field

# Activity names (wire names: never change them).
SLACK_POST = "slack.post"
SLACK_UPDATE = "slack.update"
SLACK_OPEN_SESSION = "slack.open_session"
SLACK_PROMPT = "slack.prompt"
SLACK_WAIT_RUN = "slack.wait_run"
SLACK_ABORT = "slack.abort"
SLACK_LOG_BOT = "slack.log_bot"
SLACK_DELETE = "slack.delete"
SLACK_UPLOAD = "slack.upload"
SLACK_STEER = "slack.steer"
SLACK_DELIVER_EVENT = "slack.deliver_event"
SLACK_CLOSE = "slack.close"

ContextMode = Literal["thread", "channel"]

# The conversation workflow's memo key: the user ids a running run is for (absent when idle).
RUNNING_FOR = "runningFor"

# Slack's ids (C…, G…, D…, U…) are capital letters and digits: never `/`, `.` or empty, so a
# channel id can name a folder under the working directory and nothing else.
_SLACK_ID = re.compile(r"[A-Z0-9]{1,64}")


def is_slack_id(value: str) -> bool:
    return _SLACK_ID.fullmatch(value) is not None


def is_slack_ts(ts: str) -> bool:
    """A message ts as Slack writes it, `1700000000.000100`."""
    head, _, tail = ts.partition(".")
    return head.isdigit() and tail.isdigit() and len(ts) <= 32


def channel_folder(working_dir: str, channel: str) -> str:
    """`<dir>/<channel>`, refusing a channel that is not a Slack id (`../x` would leave `<dir>`)."""
    if not is_slack_id(channel):
        raise ValueError(f"not a Slack channel id: {channel!r}")
    return f"{working_dir}/{channel}"


class SlackMessage(BaseModel):
    """One accepted user message, as the gateway signals it."""

    channel: str
    ts: str
    thread_ts: str | None = None
    user: str
    user_name: str
    text: str
    is_dm: bool = False
    # mom's prompt stamp, `YYYY-MM-DD HH:MM:SS+HH:MM`, made by the gateway (the workflow has no clock zone).
    stamp: str
    # Downloaded attachments, relative to the working directory (`<channel>/attachments/<ms>_<name>`).
    attachments: list[str] = Field(default_factory=list)
    # The events-directory file that woke the bot, for a scheduled wake-up; None for people.
    event: str | None = None
    # A plain reply in a bot thread: it steers a running session and starts nothing.
    steer: bool = False
    # Whether the sender may stop someone else's run (everyone, unless `--admins` names some).
    admin: bool = True


class ToolStarted(BaseModel):
    call_id: str
    label: str
    # The call's arguments as its thread entry shows them, kept by the workflow so a gateway
    # restarted mid-tool still shows them when the tool ends.
    args: str = ""


class FileUpload(BaseModel):
    """A file the `attach` tool named, for the workflow to upload."""

    path: str
    title: str


class ToolEnded(BaseModel):
    call_id: str
    tool: str
    label: str
    is_error: bool
    args: str = ""
    result: str = ""
    upload: FileUpload | None = None
    # From the tool's start in the session to when its end was first seen (None: not known).
    seconds: float | None = None


class ThreadCopy(BaseModel):
    """An assistant message's thinking (as `_..._`) or text, copied into the thread as mom does;
    `after_tools` places it among the tool details of the same page."""

    text: str
    after_tools: int = 0
    # A copy of the assistant's text (not thinking or a notice): the main message shows it too.
    is_text: bool = False


class RunUsage(BaseModel):
    """Tokens and dollars of a run's model calls, for mom's usage summary."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_input: float = 0.0
    cost_output: float = 0.0
    cost_cache_read: float = 0.0
    cost_cache_write: float = 0.0
    cost_total: float = 0.0

    def add(self, other: RunUsage) -> RunUsage:
        return RunUsage(
            **{name: getattr(self, name) + getattr(other, name) for name in RunUsage.model_fields}
        )


class RunProgress(BaseModel):
    """What happened in a session since an offset, small enough for history."""

    next_offset: int
    started: list[ToolStarted] = Field(default_factory=list)
    ended: list[ToolEnded] = Field(default_factory=list)
    texts: list[str] = Field(default_factory=list)
    done: bool = False
    final_text: str = ""
    error: str | None = None
    aborted: bool = False
    thinking: list[str] = Field(default_factory=list)
    copies: list[ThreadCopy] = Field(default_factory=list)
    usage: RunUsage = Field(default_factory=RunUsage)
    # The last answered call's context (input + output + cache), and the model's window, once done.
    context_tokens: int = 0
    context_window: int = 0
    # The main message's lines in the order they happened: thinking, texts between tool
    # calls, `_→ label_` per call, `_Error: ..._` per failed call.
    lines: list[str] = Field(default_factory=list)


class RunState(BaseModel):
    """The run in progress; carried across continue-as-new so a resumed run edits its own message."""

    messages: list[SlackMessage]
    main_ts: str | None = None
    offset: int | None = None
    lines: list[str] = Field(default_factory=list)
    shown: str = ""
    final_text: str = ""
    # The assistant's texts shown in the main message, for the channel's log.
    texts: list[str] = Field(default_factory=list)
    # Thread posts of this run, so `[SILENT]` can take them back.
    thread_posts: list[str] = Field(default_factory=list)
    usage: RunUsage = Field(default_factory=RunUsage)
    context_tokens: int = 0
    session_done: bool = False
    # People told this run is busy, so each hears it once.
    busy_noticed: list[str] = Field(default_factory=list)
    # In thread mode the run's tool details, thinking and notices are one message in the
    # thread, edited as they come (not a post each among the people's messages).
    details_ts: str | None = None
    details: str = ""
    details_shown: str = ""


class SlackConversationState(BaseModel):
    seen: list[str] = Field(default_factory=list)
    queue: list[SlackMessage] = Field(default_factory=list)
    session_id: str | None = None
    run: RunState | None = None
    stopping_ts: str | None = None
    # The newest message ts whose log lines the session has been given.
    synced_ts: str = ""


class SlackConversationInput(BaseModel):
    working_dir: str
    channel: str
    root_ts: str | None = None
    context_mode: ContextMode = "thread"
    bot_name: str = "mom"
    state: SlackConversationState = Field(default_factory=SlackConversationState)
    # Seconds of idleness after which the conversation closes (its session too); 0: never.
    idle_close_s: float = 0

    def context_file(self) -> str:
        """pi's session file of this conversation, where mom keeps it."""
        folder = channel_folder(self.working_dir, self.channel)
        if self.context_mode == "thread" and self.root_ts:
            if not is_slack_ts(self.root_ts):
                raise ValueError(f"not a Slack message ts: {self.root_ts!r}")
            return f"{folder}/threads/{self.root_ts}/context.jsonl"
        return f"{folder}/context.jsonl"

    def settings_file(self) -> str:
        return f"{channel_folder(self.working_dir, self.channel)}/settings.json"

    def state_file(self) -> str:
        """Where a closed conversation leaves what its next run must know, beside its session."""
        return self.context_file().removesuffix("context.jsonl") + "conversation.json"

    def reply_thread(self) -> str | None:
        return self.root_ts if self.context_mode == "thread" else None


class PostRequest(BaseModel):
    channel: str
    text: str
    thread_ts: str | None = None


class UpdateRequest(BaseModel):
    channel: str
    ts: str
    text: str


class DeleteRequest(BaseModel):
    channel: str
    ts: str


class UploadRequest(BaseModel):
    channel: str
    thread_ts: str | None = None
    path: str
    title: str
    # Only files in here are uploaded, whatever a tool named.
    working_dir: str


class CloseRequest(BaseModel):
    """An idle conversation closing: its session stops, what it knew is kept for the next run."""

    session_id: str | None = None
    state_file: str
    synced_ts: str = ""
    seen: list[str] = Field(default_factory=list)


class OpenSessionRequest(BaseModel):
    context_file: str


class LogSync(BaseModel):
    """Which lines of the channel's log.jsonl a prompt brings along, as mom's sync before a run:
    people's lines after `after_ts` up to `until_ts`, not those the prompt itself carries."""

    log_file: str
    after_ts: str = ""
    until_ts: str
    # In thread mode only the thread's own lines (its root and replies).
    thread_ts: str | None = None
    exclude_ts: list[str] = Field(default_factory=list)


class PromptSession(BaseModel):
    context_file: str
    text: str
    # Absolute paths of images to send as image blocks.
    images: list[str] = Field(default_factory=list)
    sync: LogSync | None = None
    # Where mom's prompt (memory, skills) for this run is read from; empty keeps the session's.
    working_dir: str = ""
    channel: str = ""
    # The channel's settings.json (its model and thinking level), read before each run.
    settings_file: str = ""


class BotLogRequest(BaseModel):
    """The bot's texts of one run, logged under the ts of the main message that showed them."""

    working_dir: str
    channel: str
    ts: str
    thread_ts: str | None = None
    texts: list[str]


class SteerSession(BaseModel):
    session_id: str
    text: str
    # Absolute paths of the reply's images, sent as image blocks as a prompt's are.
    images: list[str] = Field(default_factory=list)
    # The conversation's working directory, so attachment paths read as the tools see them.
    working_dir: str = ""


class SlackEventFire(BaseModel):
    """One wake-up from the events directory, as its event workflow (or schedule) carries it."""

    working_dir: str
    file: str
    # sha256 prefix of the file's bytes when it was scheduled: an edited or deleted file no longer fires it.
    digest: str
    channel: str
    text: str
    kind: Literal["immediate", "one-shot", "periodic"]
    # mom's third field of `[EVENT:file:kind:detail]`: the time, the cron, or `immediate`.
    detail: str
    bot_name: str = "mom"
    # Makes the signalled message unique per firing; the event workflow fills it with its run id.
    fire_id: str = ""
    # A one-shot's time (ISO, with its offset), as the watcher read it from the file.
    due_at: str = ""
    # How many seconds after its time the firing ran, filled by the event workflow (None: not
    # known); a firing missed by more than the gateway's grace is not run late.
    late_s: float | None = None


class WaitRun(BaseModel):
    session_id: str
    offset: int
    max_wait_s: float = 8.0


def _scope(working_dir: str) -> str:
    return hashlib.sha256(working_dir.encode()).hexdigest()[:8]


def conversation_workflow_id(working_dir: str, channel: str, root_ts: str | None) -> str:
    """One workflow per conversation of one working directory, so a redelivered event or a
    second gateway signals the same execution instead of starting another."""
    return f"slack-{_scope(working_dir)}-{channel}" + (f"-{root_ts}" if root_ts else "")


def event_workflow_id(working_dir: str, file: str) -> str:
    """The one-shot workflow, or the Schedule, of one events-directory file."""
    return f"slack-event-{_scope(working_dir)}-{file}"


def event_id_prefix(working_dir: str) -> str:
    return f"slack-event-{_scope(working_dir)}-"


def slack_task_queue(working_dir: str) -> str:
    """The gateways of one working directory poll a queue of their own: its activities need
    their Slack tokens and session options, not another bot's."""
    return f"tempi-slack-{_scope(working_dir)}"
