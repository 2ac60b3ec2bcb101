"""What a Slack run's prompt carries besides its own text: the channel's log lines the
session has not seen, and the attached images read from disk."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

from tempi.activities.slack.attachments import image_mime_type
from tempi.activities.slack.channel_log import read_log
from tempi.agent.messages import ImageContent
from tempi.workflows.slack_text import quote_name, quote_text
from tempi.workflows.slack_types import LogSync

log = logging.getLogger("tempi.slack")


def _after(ts: str, bound: str) -> bool:
    return not bound or float(ts) > float(bound)


def unseen_log_lines(sync: LogSync) -> list[str]:
    """People's log lines since the last run, as mom syncs them into the session: `[userName]: text`."""
    lines = []
    excluded = set(sync.exclude_ts)
    for entry in read_log(Path(sync.log_file)):
        if entry.is_bot or entry.ts in excluded or "." not in entry.ts:
            continue
        if not _after(entry.ts, sync.after_ts) or float(entry.ts) > float(sync.until_ts):
            continue
        if sync.thread_ts is not None and sync.thread_ts not in (entry.ts, entry.thread_ts):
            continue
        name = quote_name(entry.user_name or entry.user or "unknown")
        lines.append(f"[{name}]: {quote_text(entry.text)}")
    return lines


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
