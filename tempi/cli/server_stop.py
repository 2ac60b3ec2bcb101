"""`tempi server stop`: stop the background service, but not behind the back of a session
that is working or open in a terminal, unless asked with --force."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError

from tempi.cli.errors import UserError
from tempi.cli.open_clients import open_clients
from tempi.store.errors import SessionFileError
from tempi.store.session_store import SessionStore
from tempi.workers.service import read_info, stop_service
from tempi.workers.temporal_client import TemporalUnreachable, connect
from tempi.workflows.session_types import SESSION_WORKFLOW

LOOKUP_TIMEOUT_S = 15.0
WORKFLOW_PREFIX = "session-"

WHAT_FORCE_DOES = (
    "`tempi server stop --force` stops it anyway. Nothing is lost: the sessions' workflows stay in "
    "the server's database and go on by themselves when the server is back (`tempi server "
    "start`, the next tempi command or a message typed in an open terminal starts it). A model answer that was streaming is asked for again then; a tool that "
    "was running (a bash command, say) is stopped now and not run again, and the model is told "
    "it may not have completed. Terminals showing a session say the server is gone and "
    "reconnect when it is back."
)


@dataclass
class RunningSession:
    session_id: str
    why: str
    cwd: str
    session_file: str


async def _working(client: Client) -> list[str]:
    """Session ids whose workflow has a model call, tool or subagent in flight (this needs
    no worker: the server knows its pending activities and children)."""
    ids: list[str] = []
    query = f"WorkflowType='{SESSION_WORKFLOW}' AND ExecutionStatus='Running'"
    async for wf in client.list_workflows(query, rpc_timeout=timedelta(seconds=5)):
        if wf.id.startswith(WORKFLOW_PREFIX):
            ids.append(wf.id)
    gate = asyncio.Semaphore(16)

    async def busy(workflow_id: str) -> bool:
        async with gate:
            desc = await client.get_workflow_handle(workflow_id).describe(rpc_timeout=timedelta(seconds=5))
        raw = desc.raw_description
        return bool(raw.pending_activities or raw.pending_children)

    flags = await asyncio.gather(*(busy(w) for w in ids))
    return [w.removeprefix(WORKFLOW_PREFIX) for w, flag in zip(ids, flags, strict=True) if flag]


def _where(store: SessionStore, session_id: str) -> tuple[str, str]:
    try:
        path = store.find_session(session_id)
        return store.load(path).header.cwd, str(path)
    except SessionFileError:
        return "?", "?"


async def running_sessions(address: str, home: Path, store: SessionStore) -> list[RunningSession]:
    client = await connect(address)
    working = await asyncio.wait_for(_working(client), LOOKUP_TIMEOUT_S)
    found: dict[str, RunningSession] = {}
    for session_id in working:
        cwd, file = _where(store, session_id)
        found[session_id] = RunningSession(session_id, "working", cwd, file)
    for open_client in open_clients(home):
        shown = f"open in a terminal (pid {open_client.pid})"
        if open_client.session_id in found:
            found[open_client.session_id].why += f", {shown}"
            continue
        cwd, file = _where(store, open_client.session_id)
        found[open_client.session_id] = RunningSession(
            open_client.session_id,
            shown,
            open_client.cwd if cwd == "?" else cwd,
            open_client.session_file or file,
        )
    return list(found.values())


def session_table(sessions: list[RunningSession]) -> str:
    return "\n".join(
        f"  {s.session_id[:8]}  {s.why}\n      cwd {s.cwd}\n      file {s.session_file}" for s in sessions
    )


async def stop_server(home: Path, store: SessionStore, *, force: bool) -> int:
    info = read_info(home)
    if info is None:
        print("tempi server: was not running")
        return 0
    try:
        sessions = await running_sessions(info.address, home, store)
    except (TemporalUnreachable, RPCError, TimeoutError) as err:
        if not force:
            raise UserError(
                f"cannot tell whether sessions are running on the background server ({err or 'no answer'}). "
                + WHAT_FORCE_DOES
            ) from err
        sessions = []
    if sessions and not force:
        count = f"{len(sessions)} session{'s' if len(sessions) > 1 else ''}"
        raise UserError(
            f"not stopping the background server: {count} running on it:\n{session_table(sessions)}\n"
            + WHAT_FORCE_DOES
        )
    stopped = await asyncio.to_thread(stop_service, home)
    print("tempi server: stopped" if stopped else "tempi server: was not running")
    if sessions:
        print(
            f"tempi server: these sessions wait for the server to come back:\n{session_table(sessions)}",
            file=sys.stderr,
        )
    return 0
