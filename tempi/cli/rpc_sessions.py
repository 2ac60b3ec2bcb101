"""The RPC commands that name, open, fork or export sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tempi.agent.session_entries import MessageEntry
from tempi.cli.html_export import SessionSetup, default_export_path, export_session_html
from tempi.cli.rpc_context import NO_DATA, RpcContext, RpcError, text_arg
from tempi.cli.session_choice import OpenSession
from tempi.client import SessionOptions
from tempi.client.transcript import load_at_leaf, user_text
from tempi.store.errors import SessionFileError

NAME_EVENT_WAIT_S = 5.0


async def set_session_name(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    name = text_arg(cmd, "name").strip()
    if not name:
        raise RpcError("Session name cannot be empty")
    await srv.session.rename(name)
    # pi sends session_info_changed before the response.
    await srv.events_until(lambda e: e["type"] == "session_info_changed", NAME_EVENT_WAIT_S)
    return NO_DATA


async def _options_now(srv: RpcContext) -> SessionOptions:
    """The options the next session starts with: the current session's model and level."""
    state = await srv.session.state()
    options = srv.planned.options
    options.model, options.thinking_level = state.model, state.thinking_level
    return options


async def new_session(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    parent = cmd.get("parentSession")
    session = await srv.service.start(
        await _options_now(srv), parent_session=parent if isinstance(parent, str) else None
    )
    await srv.use_session(OpenSession(session))
    return {"cancelled": False}


async def _continue_file(srv: RpcContext, path: Path) -> None:
    options = await _options_now(srv)
    try:
        session = await srv.service.resume(path, options, find_model=srv.planned.registry.find)
    except SessionFileError as err:
        raise RpcError(str(err)) from err
    await srv.use_session(OpenSession(session))


async def _fork(srv: RpcContext, source: Path, leaf_id: str | None) -> None:
    options = await _options_now(srv)
    try:
        session = await srv.service.fork(source, leaf_id, options, find_model=srv.planned.registry.find)
    except SessionFileError as err:
        raise RpcError(str(err)) from err
    await srv.use_session(OpenSession(session))


async def switch_session(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    path = Path(text_arg(cmd, "sessionPath")).expanduser()
    if not path.is_file():
        raise RpcError(f"Session file {path} does not exist")
    await _continue_file(srv, path.absolute())
    return {"cancelled": False}


async def fork(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    entry_id = text_arg(cmd, "entryId")
    s = await srv.session.state()
    loaded, _ = await load_at_leaf(srv.service.store, s.session_file, s.leaf_id)
    entry = loaded.tree.get(entry_id) if loaded else None
    if not isinstance(entry, MessageEntry) or entry.message.role != "user":
        raise RpcError(f"Invalid entry ID for forking: {entry_id} is not a user message of this session")
    await _fork(srv, Path(s.session_file), entry.parent_id)
    return {"text": user_text(entry.message.to_json_dict()), "cancelled": False}


async def clone(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    s = await srv.session.state()
    loaded, leaf = await load_at_leaf(srv.service.store, s.session_file, s.leaf_id)
    if loaded is None or leaf is None:
        raise RpcError("Cannot clone session: no current entry selected")
    await _fork(srv, Path(s.session_file), leaf)
    return {"cancelled": False}


async def export_html(srv: RpcContext, cmd: dict[str, Any]) -> Any:
    s = await srv.session.state()
    await load_at_leaf(srv.service.store, s.session_file, s.leaf_id)
    source = Path(s.session_file)
    if not source.is_file():
        raise RpcError("Nothing to export yet: the session file is written after the first answer.")
    wanted = cmd.get("outputPath")
    target = (
        Path(wanted).expanduser()
        if isinstance(wanted, str) and wanted
        else srv.cwd / default_export_path(source)
    )
    export_session_html(srv.service.store, source, target, await SessionSetup.of(srv.session))
    return {"path": str(target)}
