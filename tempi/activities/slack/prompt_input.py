"""What a Slack run's prompt carries besides its own text: the channel's log lines the
session has not seen, and the attached images read from disk."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

from tempi.activities.slack.attachments import image_mime_type
from tempi.activities.slack.channel_log import LoggedMessage, read_log
from tempi.agent.messages import ImageContent
from tempi.workflows.slack_text import quote_name, quote_text
from tempi.workflows.slack_types import LogSync

log = logging.getLogger("tempi.slack")

# A thread's first run sees at most this many channel lines from before it.
CHANNEL_CONTEXT_LINES = 100


def _after(ts: str, bound: str) -> bool:
    return not bound or float(ts) > float(bound)


def _line(entry: LoggedMessage) -> str:
    name = quote_name(entry.user_name or entry.user or "unknown")
    return f"[{name}]: {quote_text(entry.text)}"


def _people(sync: LogSync) -> list[LoggedMessage]:
    excluded = set(sync.exclude_ts)
    return [e for e in read_log(Path(sync.log_file)) if not e.is_bot and e.ts not in excluded and "." in e.ts]


def unseen_log_lines(sync: LogSync) -> list[str]:
    """People's log lines since the last run, as mom syncs them into the session: `[userName]: text`."""
    lines = []
    for entry in _people(sync):
        if not _after(entry.ts, sync.after_ts) or float(entry.ts) > float(sync.until_ts):
            continue
        if sync.thread_ts is not None and sync.thread_ts not in (entry.ts, entry.thread_ts):
            continue
        lines.append(_line(entry))
    return lines


def lines_before_thread(sync: LogSync, limit: int = CHANNEL_CONTEXT_LINES) -> list[str]:
    """For a thread's first run: what was said at the channel's top level before the thread
    began, since the bot last spoke in the channel (what mom's channel session would hold),
    at most `limit` lines, newest kept."""
    if sync.thread_ts is None:
        return []
    root = float(sync.thread_ts)
    entries = read_log(Path(sync.log_file))
    spoke = [float(e.ts) for e in entries if e.is_bot and "." in e.ts and float(e.ts) < root]
    since = max(spoke, default=0.0)
    lines = [
        _line(entry) for entry in _people(sync) if entry.thread_ts is None and since < float(entry.ts) < root
    ]
    return lines[max(0, len(lines) - limit) :]


def load_images(paths: list[str]) -> list[ImageContent]:
    images = []
    for path in paths:
        mime = image_mime_type(path)
        file = Path(path)
        if mime is None or not file.is_file():
            log.warning("attachment %s is not a readable image; the model will not see it", path)
            continue
        images.append(ImageContent(data=base64.b64encode(file.read_bytes()).decode(), mime_type=mime))
    return images
