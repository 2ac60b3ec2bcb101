"""A session's tree in the console: drawn by the HTML export's sidebar renderer, with the
two moves the interactive mode makes in it: /tree's switch of the session's leaf (through
SessionClient.navigate) and /fork's new session file from a chosen entry (through
SessionService.fork)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from tempi.agent.session_entries import MessageEntry, SessionEntry
from tempi.cli.html_export import session_tree
from tempi.client import SessionRefused
from tempi.client.options import SessionOptions
from tempi.client.transcript import load_at_leaf, user_text
from tempi.store.loading import LoadedSession
from tempi.web.session_controls import error_response, json_body

if TYPE_CHECKING:
    from tempi.web.app import Console

MAX_INSTRUCTIONS_CHARS = 20_000


def _user_entry(entry: SessionEntry) -> MessageEntry | None:
    """A user message: choosing one re-edits it (as /tree and /fork do), so the move goes to
    its parent and its text comes back for the composer."""
    return entry if isinstance(entry, MessageEntry) and entry.message.role == "user" else None


class TreeControls:
    def __init__(self, console: Console) -> None:
        self.console = console

    async def _loaded(self, session_id: str) -> tuple[LoadedSession | None, str | None, Path]:
        """The session's file, loaded, with its leaf: the running workflow's when it runs."""
        session = self.console.service.get(session_id)
        store = self.console.service.store
        if await session.is_running():
            state = await session.state()
            loaded, leaf = await load_at_leaf(store, state.session_file, state.leaf_id)
            return loaded, leaf, Path(state.session_file)
        path = self.console.file_of(session_id)
        loaded = await asyncio.to_thread(store.load, path)
        return loaded, loaded.tree.leaf_id, path

    async def tree(self, request: web.Request) -> web.StreamResponse:
        session_id = self.console.session_id_of(request)
        loaded, leaf, _ = await self._loaded(session_id)
        if loaded is None:
            return web.json_response({"html": "", "title": "no messages yet", "leaf": None, "path": []})
        drawn = await asyncio.to_thread(session_tree, loaded)
        path = [entry.id for entry in loaded.tree.path_to(leaf)] if leaf else []
        return web.json_response({"html": drawn.html, "title": drawn.title, "leaf": leaf, "path": path})

    async def _chosen(self, request: web.Request) -> tuple[str, LoadedSession, SessionEntry, Path]:
        session_id = self.console.session_id_of(request)
        entry_id = (await json_body(request)).get("entryId")
        if not isinstance(entry_id, str) or not entry_id:
            raise _refusal(400, 'name the entry: {"entryId": "..."} (the tree\'s data-id)')
        await self.console.running_session(session_id)
        loaded, _, path = await self._loaded(session_id)
        entry = loaded.tree.get(entry_id) if loaded is not None else None
        if loaded is None or entry is None:
            raise _refusal(404, f"no entry {entry_id} in session {session_id[:8]}")
        return session_id, loaded, entry, path

    async def navigate(self, request: web.Request) -> web.StreamResponse:
        """/tree's move: {"entryId", "summarize": bool, "instructions": text}."""
        session_id, _, entry, _ = await self._chosen(request)
        body = await json_body(request)
        summarize = body.get("summarize") is True
        instructions = body.get("instructions")
        if not isinstance(instructions, str) or not instructions.strip():
            instructions = None
        elif len(instructions) > MAX_INSTRUCTIONS_CHARS:
            return error_response(
                413, f"summary instructions are at most {MAX_INSTRUCTIONS_CHARS} characters"
            )
        user_entry = _user_entry(entry)
        new_leaf = user_entry.parent_id if user_entry is not None else entry.id
        session = self.console.service.get(session_id)
        try:
            result = await session.navigate(
                entry.id, new_leaf, summarize=summarize, custom_instructions=instructions
            )
        except SessionRefused as err:
            return error_response(409, f"could not move there: {err}")
        self.console.wakeups.wake(session_id, reload=True)
        return web.json_response(
            {
                "leaf": result.leaf_id,
                "editorText": user_text(user_entry.message.to_json_dict()) if user_entry else None,
            }
        )

    async def fork(self, request: web.Request) -> web.StreamResponse:
        """/fork's move: a new session holding the branch up to the chosen entry (up to a user
        message's parent, its text for the new session's composer), continued with this
        session's options, model and thinking level."""
        session_id, _, entry, path = await self._chosen(request)
        user_entry = _user_entry(entry)
        leaf = user_entry.parent_id if user_entry is not None else entry.id
        source = self.console.service.get(session_id)
        config = await source.running_config()
        state = await source.state()
        options = SessionOptions.model_validate(
            {
                **{name: getattr(config, name) for name in SessionOptions.model_fields},
                "model": state.model,
                "thinking_level": state.thinking_level,
            }
        )
        forked = await self.console.service.fork(path, leaf, options)
        return web.json_response(
            {
                "id": forked.session_id,
                "editorText": user_text(user_entry.message.to_json_dict()) if user_entry else None,
            }
        )


def _refusal(status: int, message: str) -> web.HTTPException:
    cls = {400: web.HTTPBadRequest, 404: web.HTTPNotFound}[status]
    return cls(text=json.dumps({"error": message}), content_type="application/json")
