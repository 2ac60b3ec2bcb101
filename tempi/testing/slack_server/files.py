"""Files: the three-step upload, file_share messages, and bot-token-only downloads."""

from __future__ import annotations

import json
import mimetypes
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tempi.testing.slack_server.events import bot_message_event
from tempi.testing.slack_server.methods import MAX_TEXT, SlackMethods
from tempi.testing.slack_server.paging import SlackError, required
from tempi.testing.slack_server.workspace import Message, StoredFile

SIGNIN_PAGE = "<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in to Slack</body></html>"


class FileService:
    def __init__(self, methods: SlackMethods, bot_token: Callable[[], str]) -> None:
        self.methods = methods
        self.workspace = methods.workspace
        self._bot_token = bot_token
        self.base_url: Callable[[], str] = lambda: ""

    def store(
        self,
        name: str,
        content: bytes | None,
        user: str,
        mimetype: str | None = None,
        title: str | None = None,
    ) -> StoredFile:
        ws = self.workspace
        file_id = ws.ids.make("F")
        base = f"{self.base_url()}/files-pri/{ws.team_id}-{file_id}"
        stored = StoredFile(
            id=file_id,
            name=name,
            title=title or name,
            mimetype=mimetype or mimetypes.guess_type(name)[0] or "application/octet-stream",
            user=user,
            created=int(time.time()),
            content=content,
            url_private=f"{base}/{name}",
            url_private_download=f"{base}/download/{name}",
        )
        ws.files[file_id] = stored
        return stored

    # -- Web API methods ---------------------------------------------------------------

    async def get_upload_url(self, args: dict[str, Any]) -> dict[str, Any]:
        filename = required(args, "filename")
        length = required(args, "length")
        if not length.isdigit():
            raise SlackError("invalid_arguments")
        stored = self.store(filename, None, self.workspace.bot_user_id)
        stored.expected_length = int(length)
        return {"upload_url": f"{self.base_url()}/upload/v1/{stored.id}", "file_id": stored.id}

    async def complete_upload(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            entries = json.loads(required(args, "files"))
        except ValueError as err:
            raise SlackError("invalid_arguments") from err
        if not isinstance(entries, list) or not entries:
            raise SlackError("invalid_arguments")
        ws = self.workspace
        uploaded: list[StoredFile] = []
        for entry in entries:
            stored = ws.files.get(str(entry.get("id"))) if isinstance(entry, dict) else None
            if stored is None or stored.content is None:
                raise SlackError("file_not_found")
            if entry.get("title"):
                stored.title = str(entry["title"])
            uploaded.append(stored)
        channel_id = args.get("channel_id") or args.get("channels")
        if channel_id:
            channel = self.methods.member_channel(
                {"channel": str(channel_id).split(",")[0]}, for_reading=False
            )
            thread_ts = args.get("thread_ts") or None
            message = ws.add_message(
                Message(
                    channel=channel.id,
                    ts=ws.clock.next(),
                    user=ws.bot_user_id,
                    text=str(args.get("initial_comment") or "")[:MAX_TEXT],
                    thread_ts=str(thread_ts) if thread_ts else None,
                    bot_id=ws.bot.bot_id,
                    subtype="file_share",
                    file_ids=[f.id for f in uploaded],
                )
            )
            self.methods.record("file_share", message, message.text)
            self.methods.publish(bot_message_event(ws, message))
        return {"files": [{"id": f.id, "title": f.title} for f in uploaded]}

    # -- plain HTTP routes -------------------------------------------------------------

    async def upload(self, request: web.Request) -> web.Response:
        stored = self.workspace.files.get(request.match_info["file_id"])
        if stored is None or stored.content is not None:
            return web.Response(status=404, text="upload URL unknown or already used")
        if request.content_type.startswith("multipart/"):
            form = await request.post()
            field = next(iter(form.values()), None)
            content = field.file.read() if isinstance(field, web.FileField) else str(field or "").encode()
        else:
            content = await request.read()
        stored.content = content
        return web.Response(text=f"OK - {len(content)}", content_type="text/plain")

    async def download(self, request: web.Request) -> web.StreamResponse:
        team_file = request.match_info["team_file"]
        stored = self.workspace.files.get(team_file.rsplit("-", 1)[-1])
        if request.headers.get("Authorization") != f"Bearer {self._bot_token()}":
            # Slack sends a request without the bot token to its sign-in page, not to the file.
            raise web.HTTPFound(f"/signin?redir={request.path}")
        if stored is None or stored.content is None:
            return web.Response(status=404, text="file not found")
        return web.Response(
            body=stored.content,
            content_type=stored.mimetype,
            headers={"Content-Disposition": f'attachment; filename="{stored.name}"'},
        )

    async def signin(self, request: web.Request) -> web.Response:
        return web.Response(text=SIGNIN_PAGE, content_type="text/html")
