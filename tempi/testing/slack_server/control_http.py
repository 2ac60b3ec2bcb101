"""`POST /_control/<action>` with a JSON body: the control API (control.py) for a test that
runs the server in another process (`python -m tempi.testing.slack_server`)."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tempi.testing.slack_server.control import Attachment, SlackControl

Action = Callable[[dict[str, Any]], Awaitable[Any]]


class ControlRoutes:
    def __init__(self, control: SlackControl) -> None:
        self.control = control

    def install(self, app: web.Application) -> None:
        app.router.add_post("/_control/{action}", self.handle)

    def actions(self) -> dict[str, Action]:
        s = self.control

        async def info(body: dict[str, Any]) -> Any:
            return {
                "api_url": s.api_url,
                "bot_token": s.bot_token,
                "app_token": s.app_token,
                "bot_user_id": s.bot_user_id,
                "open_connections": s.hub.open_connections,
                "connections_opened": s.connections_opened,
            }

        async def add_user(body: dict[str, Any]) -> Any:
            return {"user": s.add_user(**body)}

        async def add_channel(body: dict[str, Any]) -> Any:
            return {"channel": s.add_channel(**body)}

        async def open_dm(body: dict[str, Any]) -> Any:
            return {"channel": s.open_dm(**body)}

        async def user_says(body: dict[str, Any]) -> Any:
            # Over HTTP a file's bytes travel as base64 in `content_base64`.
            files = [
                Attachment(f["name"], base64.b64decode(f["content_base64"]), f.get("mimetype"))
                for f in body.pop("files", None) or []
            ]
            return {"ts": s.user_says(files=files, **body)}

        async def rate_limit(body: dict[str, Any]) -> Any:
            s.rate_limit(**body)
            return {}

        async def fail(body: dict[str, Any]) -> Any:
            s.fail(**body)
            return {}

        async def revoke(body: dict[str, Any]) -> Any:
            s.revoke(**body)
            return {}

        async def disconnect(body: dict[str, Any]) -> Any:
            return {"told": await s.disconnect(**body)}

        async def bot_messages(body: dict[str, Any]) -> Any:
            return {"messages": [m.model_dump() for m in s.bot_messages(**body)]}

        async def actions(body: dict[str, Any]) -> Any:
            return {"actions": [a.model_dump() for a in s.actions]}

        async def calls(body: dict[str, Any]) -> Any:
            return {"calls": [c.model_dump() for c in s.calls(**body)]}

        async def deliveries(body: dict[str, Any]) -> Any:
            return {
                "deliveries": [dataclasses.asdict(d) for d in s.deliveries],
                "acks": s.acks,
                "redeliveries": s.redeliveries,
            }

        return {
            "info": info,
            "add_user": add_user,
            "add_channel": add_channel,
            "open_dm": open_dm,
            "user_says": user_says,
            "rate_limit": rate_limit,
            "fail": fail,
            "revoke": revoke,
            "disconnect": disconnect,
            "bot_messages": bot_messages,
            "actions": actions,
            "calls": calls,
            "deliveries": deliveries,
        }

    async def handle(self, request: web.Request) -> web.Response:
        table = self.actions()
        name = request.match_info["action"]
        action = table.get(name)
        if action is None:
            return web.json_response(
                {"error": f"unknown control action {name!r}", "actions": sorted(table)}, status=404
            )
        try:
            body = json.loads(await request.read() or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            return web.json_response(await action(body))
        except (ValueError, TypeError, KeyError) as err:
            return web.json_response({"error": f"{name}: {err}"}, status=400)
