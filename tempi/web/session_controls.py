"""A running session's other controls in the console: the model and thinking level, compact,
and the HTML export; each through SessionClient, as the interactive mode's /model,
/thinking, /compact and /export go.

The model list names models only (provider, id, name, whether they think): never a base
URL, header or key source from models.json."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from aiohttp import web

from tempi.agent.model_spec import THINKING_LEVELS, ModelSpec, ThinkingLevel
from tempi.agent.thinking_levels import DEFAULT_THINKING_LEVEL
from tempi.cli.html_export import SessionSetup, render_session_html
from tempi.client import SessionRefused
from tempi.config.api_keys import has_configured_key
from tempi.config.errors import ConfigError
from tempi.config.models_json import load_model_registry
from tempi.config.settings import load_settings

if TYPE_CHECKING:
    from tempi.web.app import Console

# The export is a page of its own, script and all: downloaded, and kept from reaching the
# console's API should a browser show it in place (a sandbox has no origin, so no cookie).
EXPORT_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
    "sandbox allow-scripts allow-downloads"
)


def _available() -> list[ModelSpec]:
    """The models with a key, as /model lists them (models.json is read again each time,
    so an edit shows without restarting the console)."""
    registry = load_model_registry()
    return [m for m in registry.models if has_configured_key(m.provider, registry)]


def error_response(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


class SessionControls:
    def __init__(self, console: Console) -> None:
        self.console = console

    async def models(self, request: web.Request) -> web.StreamResponse:
        try:
            models = await asyncio.to_thread(_available)
        except ConfigError as err:
            return error_response(409, str(err))
        return web.json_response(
            {
                "models": [
                    {"provider": m.provider, "id": m.id, "name": m.name or m.id, "reasoning": m.reasoning}
                    for m in models
                ]
            }
        )

    async def set_model(self, request: web.Request) -> web.StreamResponse:
        session_id = self.console.session_id_of(request)
        body = await json_body(request)
        provider, model_id = body.get("provider"), body.get("id")
        try:
            models = await asyncio.to_thread(_available)
        except ConfigError as err:
            return error_response(409, str(err))
        found = next((m for m in models if m.provider == provider and m.id == model_id), None)
        if found is None:
            return error_response(
                400,
                f"no model {provider}/{model_id} with an API key; GET /api/models lists the ones there are",
            )
        session = await self.console.running_session(session_id)
        state = await session.state()
        settings = await asyncio.to_thread(load_settings, Path(state.cwd))
        level = await session.set_model(
            found, default_level=settings.default_thinking_level or DEFAULT_THINKING_LEVEL
        )
        self.console.wakeups.wake(session_id)
        return web.json_response({"model": f"{found.provider}/{found.id}", "thinkingLevel": level})

    async def set_thinking(self, request: web.Request) -> web.StreamResponse:
        session_id = self.console.session_id_of(request)
        level = (await json_body(request)).get("level")
        if level not in THINKING_LEVELS:
            return error_response(400, f'"level" is one of {", ".join(THINKING_LEVELS)}')
        session = await self.console.running_session(session_id)
        chosen = await session.set_thinking_level(cast(ThinkingLevel, level))
        self.console.wakeups.wake(session_id)
        return web.json_response({"thinkingLevel": chosen})

    async def compact(self, request: web.Request) -> web.StreamResponse:
        session_id = self.console.session_id_of(request)
        instructions = (await json_body(request)).get("instructions")
        session = await self.console.running_session(session_id)
        try:
            result = await session.compact(
                instructions if isinstance(instructions, str) and instructions else None
            )
        except SessionRefused as err:
            return error_response(409, str(err))
        self.console.wakeups.wake(session_id)
        return web.json_response({"ok": True, "tokensBefore": result.tokens_before})

    async def export(self, request: web.Request) -> web.StreamResponse:
        """The session as `/export` writes it (with its system prompt and tools while it runs)."""
        session_id = self.console.session_id_of(request)
        session = self.console.service.get(session_id)
        setup: SessionSetup | None = None
        if await session.is_running():
            source = Path((await session.state()).session_file)
            setup = await SessionSetup.of(session)
        else:
            source = self.console.file_of(session_id)
        store = self.console.service.store
        html = await asyncio.to_thread(
            lambda: render_session_html(store.load(source), setup=setup, jsonl=source.read_bytes())
        )
        name = json.dumps(f"tempi-session-{session_id}.html")
        return web.Response(
            text=html,
            content_type="text/html",
            headers={
                "Content-Disposition": f"attachment; filename={name}",
                "Content-Security-Policy": EXPORT_CSP,
            },
        )
