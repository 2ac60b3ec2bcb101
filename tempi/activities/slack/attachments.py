"""Files people attach in Slack: where mom keeps them and how they reach the model.

Downloads need the bot token, so they happen in the `tempi slack` process that holds it;
the workflow and the tools only ever see the local paths."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import aiohttp

from tempi.activities.slack.channel_log import LoggedAttachment
from tempi.workflows.slack_types import is_slack_id, is_slack_ts

IMAGE_TYPES = {
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "png": "image/png",
    "gif": "image/gif",
    "webp": "image/webp",
}
_UNSAFE = re.compile(r"[^a-zA-Z0-9._-]")
DOWNLOAD_TIMEOUT_S = 120


class DownloadFailed(RuntimeError):
    pass


def image_mime_type(path: str) -> str | None:
    return IMAGE_TYPES.get(path.rsplit(".", 1)[-1].lower()) if "." in path else None


def local_name(original: str, ts: str) -> str:
    """mom's name: the message's time in ms, then the file name with odd characters made `_`."""
    return f"{math.floor(float(ts) * 1000)}_{_UNSAFE.sub('_', original)}"


def planned_attachments(
    channel: str, files: list[dict[str, Any]], ts: str
) -> list[tuple[LoggedAttachment, str]]:
    """Each file of a message with a name and a URL, as (log entry, URL to fetch it from).
    The local path is built from the channel id, the ts and the cleaned name only, so a
    crafted id or name never points outside `<channel>/attachments/`."""
    if not is_slack_id(channel) or not is_slack_ts(ts):
        raise ValueError(f"not a Slack channel id and ts: {channel!r}, {ts!r}")
    planned = []
    for file in files:
        url = file.get("url_private_download") or file.get("url_private")
        name = file.get("name")
        if not url or not name:
            continue
        local = f"{channel}/attachments/{local_name(str(name), ts)}"
        planned.append((LoggedAttachment(original=str(name), local=local), str(url)))
    return planned


async def download(url: str, dest: Path, bot_token: str) -> None:
    """Fetch a private file as Slack serves it: only with the bot token, else its sign-in page."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_S)
    headers = {"Authorization": f"Bearer {bot_token}"}
    async with aiohttp.ClientSession(timeout=timeout) as http, http.get(url, headers=headers) as answer:
        if answer.status != 200 or answer.content_type == "text/html":
            # Slack answers a refused download with its sign-in page, not an error status.
            raise DownloadFailed(
                f"Slack did not hand over {url} (HTTP {answer.status}, {answer.content_type}); "
                "check that the bot token has the files:read scope"
            )
        partial = dest.with_name(dest.name + ".part")
        partial.write_bytes(await answer.read())
        partial.replace(dest)
