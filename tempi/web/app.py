"""The console's HTTP side: static pages, the session list, one session's live transcript
as Server-Sent Events, and the controls (prompt, steer, follow-up, abort), all through
the session API like any other front end.

What crosses to the browser is chosen field by field (ids, cwd, model names, counts and
the rendered conversation): never a session's configuration, which names where keys
come from, nor anything read from models.json."""

from __future__ import annotations

import asyncio
import contextlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web
from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError

from tempi.agent.thinking_levels import supported_levels
from tempi.cli.server_link import ServerLink
from tempi.cli.sessions_command import open_sessions
from tempi.client import SessionClient, SessionRefused, SessionService
from tempi.config.paths import tempi_home
from tempi.store.catalog import SessionSummary, SummaryCache
from tempi.store.errors import SessionFileError
from tempi.store.sidecar import is_safe_session_id
from tempi.web.access import access_middleware
from tempi.web.pipelines import SHARD_CHILD, Pipelines
from tempi.web.session_controls import SessionControls
from tempi.web.session_feed import Feeds, Wakeups, is_running
from tempi.web.slack import SlackConversations
from tempi.web.tree_controls import TreeControls
from tempi.workflows.session_types import workflow_id_for

# How often a page's stream looks whether its page went away while nothing is sent.
PAGE_CHECK_S = 1.0
RECONNECT_MS = 2000
MAX_PROMPT_CHARS = 1_000_000

_ASSETS = {
    "console.css": ("tempi.web", "text/css"),
    "console.js": ("tempi.web", "text/javascript"),
    "viewer.css": ("tempi.cli", "text/css"),  # the export's style: the same markup, the same look
}
_PAGES = {"overview": "index.html", "session": "session.html", "pipeline": "pipeline.html"}
_ACTIONS = ("prompt", "steer", "followUp")


def _asset(package: str, name: str) -> str:
    folder = "assets" if package == "tempi.web" else "export_assets"
    return resources.files(package).joinpath(folder, name).read_text(encoding="utf-8")


class Console:
    def __init__(self, service: SessionService, *, read_only: bool, link: ServerLink) -> None:
        self.service = service
        self.read_only = read_only
        self.link = link
        self.wakeups = Wakeups()
        # One follower per watched session, shared by all its pages.
        self.feeds = Feeds(service.store, self.link, self.wakeups)
        self.summaries = SummaryCache(service.store.roots)
        # Session files outside the store, by session id: Slack conversations' (mom's context.jsonl).
        self.known_files: dict[str, Path] = {}

    # --- pages and lists -------------------------------------------------------------

    async def page(self, request: web.Request) -> web.StreamResponse:
        info = request.match_info
        name = _PAGES[
            "session" if "session_id" in info else "pipeline" if "workflow_id" in info else "overview"
        ]
        return web.Response(text=_asset("tempi.web", name), content_type="text/html")

    async def asset(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in _ASSETS:
            raise web.HTTPNotFound()
        package, mime = _ASSETS[name]
        return web.Response(text=_asset(package, name), content_type=mime)

    async def info(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"readOnly": self.read_only})

    async def sessions(self, request: web.Request) -> web.StreamResponse:
        summaries = await asyncio.to_thread(self.summaries.list)
        try:
            states = await open_sessions(self.service.client, {workflow_id_for(s.id) for s in summaries})
            unknown = False
        except RPCError:
            states, unknown = {}, True  # the Temporal server is away: the files still list
        rows = []
        for s in summaries:
            working = states.get(workflow_id_for(s.id))
            status = (
                "unknown" if unknown else "finished" if working is None else "working" if working else "idle"
            )
            rows.append(
                {
                    "id": s.id,
                    "name": s.name,
                    "cwd": s.cwd,
                    "model": s.model,
                    "created": s.created.isoformat(),
                    "modified": s.modified.isoformat(),
                    "turns": s.turns,
                    "tokens": s.tokens,
                    "cost": s.cost,
                    "messages": s.message_count,
                    "firstMessage": (s.first_message or "")[:200],
                    "status": status,
                    "parent": s.parent_session,
                }
            )
        return web.json_response({"sessions": rows, "totals": cost_totals(summaries)})

    def session_id_of(self, request: web.Request) -> str:
        session_id = request.match_info["session_id"]
        if not is_safe_session_id(session_id):
            raise web.HTTPNotFound(text="no such session")
        return session_id

    def file_of(self, session_id: str) -> Path:
        if session_id in self.known_files:
            return self.known_files[session_id]
        try:
            return self.service.store.find_session(session_id)
        except SessionFileError as err:
            # A pipeline shard's session is kept in the pipeline's own directory.
            shards = sorted((tempi_home() / "pipelines").glob(f"*/shards/*/*_{session_id}.jsonl"))
            if shards:
                return shards[0]
            raise web.HTTPNotFound(text=f"no session {session_id}: {err}") from err

    async def session_info(self, request: web.Request) -> web.StreamResponse:
        session_id = self.session_id_of(request)
        session = self.service.get(session_id)
        if await session.is_running():
            state = await session.state()
            return web.json_response(
                {
                    "id": session_id,
                    "name": state.session_name,
                    "cwd": state.cwd,
                    "model": f"{state.model.provider}/{state.model.id}",
                    "thinkingLevel": state.thinking_level,
                    "levels": supported_levels(state.model),
                    "running": True,
                }
            )
        path = self.file_of(session_id)
        header = await asyncio.to_thread(self.service.store.read_header, path)
        summary = await asyncio.to_thread(self.summaries.summary, path)
        return web.json_response(
            {
                "id": session_id,
                "name": summary.name if summary else None,
                "cwd": header.cwd,
                # The model it last used: the page's (disabled) model list shows it, not
                # whichever model the list happens to start with.
                "model": summary.model if summary else None,
                "thinkingLevel": None,
                "levels": [],
                "running": False,
            }
        )

    # --- controls ----------------------------------------------------------------------

    async def running_session(self, session_id: str) -> SessionClient:
        session = self.service.get(session_id)
        if not await session.is_running():
            raise web.HTTPConflict(
                text=json.dumps(
                    {
                        "error": f"session {session_id[:8]} is not running: continue it with "
                        f"`tempi --session {session_id}`, then control it here"
                    }
                ),
                content_type="application/json",
            )
        return session

    async def send(self, request: web.Request) -> web.StreamResponse:
        session_id = self.session_id_of(request)
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": 'send JSON: {"text": "...", "as": "prompt"}'}, status=400)
        text = body.get("text") if isinstance(body, dict) else None
        how = body.get("as", "prompt") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip() or how not in _ACTIONS:
            return web.json_response(
                {"error": f'"text" must be non-empty and "as" one of {", ".join(_ACTIONS)}'}, status=400
            )
        if len(text) > MAX_PROMPT_CHARS:
            return web.json_response(
                {"error": f"a message is at most {MAX_PROMPT_CHARS} characters"}, status=413
            )
        session = await self.running_session(session_id)
        try:
            if how == "steer":
                await session.steer(text)
            elif how == "followUp":
                await session.follow_up(text)
            else:
                await session.prompt(text)
        except SessionRefused as err:
            return web.json_response({"error": str(err)}, status=409)
        self.wakeups.wake(session_id)
        return web.json_response({"ok": True})

    async def abort(self, request: web.Request) -> web.StreamResponse:
        session_id = self.session_id_of(request)
        session = await self.running_session(session_id)
        await session.abort()
        self.wakeups.wake(session_id)
        return web.json_response({"ok": True})

    # --- the live transcript -------------------------------------------------------------

    async def watched(self, session_id: str, workflow: str | None) -> SessionClient:
        """The session to follow: its own workflow's, or (`workflow`) the pipeline shard's
        child workflow that runs it, when that runs this very session now."""
        if workflow and SHARD_CHILD.match(workflow):
            shard = self.service.get(session_id, workflow_id=workflow)
            with contextlib.suppress(RPCError, WorkflowQueryFailedError):
                if await is_running(shard):
                    state = await shard.state()
                    if Path(state.session_file).name.endswith(f"_{session_id}.jsonl"):
                        return shard
        return self.service.get(session_id)

    async def events(self, request: web.Request) -> web.StreamResponse:
        session_id = self.session_id_of(request)
        session = await self.watched(session_id, request.query.get("workflow"))
        if not await session.is_running():
            # Found before the stream starts, so an unknown id is a 404; a running session
            # says where its file is (it may be in a sessionDir outside the store).
            session.session_path = str(self.file_of(session_id))
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        await response.write(f"retry: {RECONNECT_MS}\n\n".encode())
        with self.feeds.joined(session) as page:
            try:
                while not _gone(request) and not page.closed:
                    data = await page.take(PAGE_CHECK_S)
                    if data:
                        await response.write(data)
            except ConnectionResetError:
                pass  # the page went away
        return response


def cost_totals(summaries: list[SessionSummary]) -> dict[str, list[dict[str, Any]]]:
    """Sessions, tokens and cost by the (local) day each session started and by its model:
    a summary carries one total per session, so a session counts whole on its first day
    and under the model it last used."""
    by_day: dict[str, dict[str, Any]] = {}
    by_model: dict[str, dict[str, Any]] = {}
    for s in summaries:
        day = s.created.astimezone().date().isoformat()
        for key, table, label in ((day, by_day, "day"), (s.model or "", by_model, "model")):
            row = table.setdefault(key, {label: key or None, "sessions": 0, "tokens": 0, "cost": 0.0})
            row["sessions"] += 1
            row["tokens"] += s.tokens
            row["cost"] += s.cost
    return {
        "byDay": [by_day[d] for d in sorted(by_day, reverse=True)],
        "byModel": sorted(by_model.values(), key=lambda r: -r["cost"]),
    }


def _gone(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


def console_app(
    service: SessionService, token: str, *, read_only: bool = False, link: ServerLink | None = None
) -> web.Application:
    """`link` knows whether the embedded server runs, to wait out its restarts cheaply."""
    console = Console(service, read_only=read_only, link=link or ServerLink())

    async def close_feeds(_: web.Application) -> None:
        await console.feeds.close()

    app = web.Application(
        middlewares=[access_middleware(token, read_only=read_only)], client_max_size=4 << 20
    )
    app.on_cleanup.append(close_feeds)
    app.router.add_get("/", console.page)
    app.router.add_get("/s/{session_id}", console.page)
    app.router.add_get("/assets/{name}", console.asset)
    app.router.add_get("/api/info", console.info)
    app.router.add_get("/api/sessions", console.sessions)
    app.router.add_get("/api/sessions/{session_id}", console.session_info)
    app.router.add_get("/api/sessions/{session_id}/events", console.events)
    app.router.add_post("/api/sessions/{session_id}/send", console.send)
    app.router.add_post("/api/sessions/{session_id}/abort", console.abort)
    controls = SessionControls(console)
    app.router.add_get("/api/models", controls.models)
    app.router.add_get("/api/sessions/{session_id}/export", controls.export)
    app.router.add_post("/api/sessions/{session_id}/model", controls.set_model)
    app.router.add_post("/api/sessions/{session_id}/thinking", controls.set_thinking)
    app.router.add_post("/api/sessions/{session_id}/compact", controls.compact)
    tree = TreeControls(console)
    app.router.add_get("/api/sessions/{session_id}/tree", tree.tree)
    app.router.add_post("/api/sessions/{session_id}/navigate", tree.navigate)
    app.router.add_post("/api/sessions/{session_id}/fork", tree.fork)
    pipelines = Pipelines(service.client)
    app.router.add_get("/p/{workflow_id}", console.page)
    app.router.add_get("/api/pipelines", pipelines.list)
    app.router.add_get("/api/pipelines/{workflow_id}", pipelines.show)
    app.router.add_post("/api/pipelines/{workflow_id}/control", pipelines.act)
    app.router.add_get("/api/pipelines/{workflow_id}/reports", pipelines.reports)
    app.router.add_get("/api/pipelines/{workflow_id}/reports/{kind}", pipelines.download)
    app.router.add_get("/api/slack", SlackConversations(service.client, console).list)
    return app
