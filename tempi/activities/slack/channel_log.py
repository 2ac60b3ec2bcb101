"""A channel's `log.jsonl`, in mom's format: one JSON line per channel message, the bot's too.

It is the channel's source of truth (people and the agent grep it), so lines are appended
once: several gateway processes, a redelivered event and a retried activity all append
under a file lock and skip a line the file already holds."""

from __future__ import annotations

import datetime
import fcntl
import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from tempi.workflows.slack_types import channel_folder

LOG_NAME = "log.jsonl"


class LoggedAttachment(BaseModel):
    original: str
    # Relative to the working directory, e.g. `C0123/attachments/1732531234567_photo.png`.
    local: str


class LoggedMessage(BaseModel):
    """One line of log.jsonl; fields in mom's order, absent ones left out as JSON.stringify does."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    date: str
    ts: str
    thread_ts: str | None = Field(default=None, alias="thread_ts")
    user: str
    user_name: str | None = None
    display_name: str | None = None
    text: str
    attachments: list[LoggedAttachment] = Field(default_factory=list)
    is_bot: bool = False

    def to_line(self) -> str:
        body = self.model_dump(by_alias=True, exclude_none=True)
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n"

    def key(self) -> tuple[str, str]:
        # A bot line shares its ts with the main message it was posted in, so text tells them apart.
        return (self.ts, self.text if self.is_bot else "")


def iso_date(seconds: float) -> str:
    """JavaScript's `Date.toISOString()`: UTC, whole milliseconds, a `Z`."""
    millis = int(seconds * 1000)
    when = datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


def ts_date(ts: str) -> str:
    return iso_date(float(ts))


def log_path(working_dir: str | Path, channel: str) -> Path:
    """`<dir>/<channel>/log.jsonl`; ValueError for a channel that is not a Slack id."""
    return Path(channel_folder(str(working_dir), channel)) / LOG_NAME


def read_log(path: Path) -> list[LoggedMessage]:
    """Every readable line; a torn or hand-edited line is skipped, as mom does."""
    if not path.exists():
        return []
    return _parse(path.read_text(encoding="utf-8"))


def append_new(path: Path, entries: list[LoggedMessage]) -> list[LoggedMessage]:
    """Append the entries the log does not hold yet; returns those appended."""
    if not entries:
        return []
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    with os.fdopen(fd, "r+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.seek(0)
            held = {m.key() for m in _parse(handle.read())}
            fresh = []
            for entry in entries:
                if entry.key() not in held:
                    held.add(entry.key())
                    fresh.append(entry)
            if fresh:
                handle.write("".join(e.to_line() for e in fresh))
                handle.flush()
            return fresh
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def logged_ts(path: Path) -> set[str]:
    return {m.ts for m in read_log(path)}


def newest_ts(path: Path) -> str | None:
    """The newest Slack ts in the log, where backfill starts."""
    stamps = [m.ts for m in read_log(path) if "." in m.ts]
    return max(stamps, key=float) if stamps else None


def _parse(text: str) -> list[LoggedMessage]:
    found: list[LoggedMessage] = []
    # JSON lines end at `\n` only: a message's U+2028 or \x85 (written as it is) is not a line break.
    for line in text.split("\n"):
        if line.strip():
            try:
                found.append(LoggedMessage.model_validate_json(line))
            except ValueError:
                continue
    return found
