"""The console's Slack conversations: one row per conversation workflow (`tempi slack`'s, a
thread or a whole channel), with its state, when it was last active, and its session.

One visibility list per page load. Where a conversation keeps its session (mom's
context.jsonl under the gateway's working directory) is in the workflow's input, read
once per run from its first history event and kept: a run's input never changes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.service import RPCError

from tempi.store.errors import SessionFileError
from tempi.workflows.slack_types import RUNNING_FOR, SlackConversationInput

if TYPE_CHECKING:
    from tempi.web.app import Console

SLACK_WORKFLOW = "SlackConversationWorkflow"


class SlackConversations:
    def __init__(self, client: Client, console: Console) -> None:
        self.client = client
        self.console = console
        self._inputs: dict[str, SlackConversationInput | None] = {}  # by run id
        self._session_ids: dict[str, str] = {}  # context file -> its session id

    async def _input(self, w: WorkflowExecution) -> SlackConversationInput | None:
        if w.run_id not in self._inputs:
            found: SlackConversationInput | None = None
            handle = self.client.get_workflow_handle(w.id, run_id=w.run_id)
            async for event in handle.fetch_history_events(page_size=1):
                payloads = event.workflow_execution_started_event_attributes.input.payloads
                [decoded] = await self.client.data_converter.decode(payloads, [SlackConversationInput])
                found = decoded if isinstance(decoded, SlackConversationInput) else None
                break
            self._inputs[w.run_id] = found
        return self._inputs[w.run_id]

    def _session_of(self, context_file: Path) -> tuple[str | None, datetime | None]:
        """The conversation's session id and when its file last changed (None: no file yet)."""
        try:
            changed = datetime.fromtimestamp(context_file.stat().st_mtime, UTC)
        except OSError:
            return None, None
        key = str(context_file)
        if key not in self._session_ids:
            try:
                self._session_ids[key] = self.console.service.store.read_header(context_file).id
            except (SessionFileError, OSError):
                return None, changed
        return self._session_ids[key], changed

    async def list(self, request: web.Request) -> web.StreamResponse:
        latest: dict[str, WorkflowExecution] = {}
        try:
            async for w in self.client.list_workflows(f"WorkflowType = '{SLACK_WORKFLOW}'"):
                if w.id not in latest or w.start_time > latest[w.id].start_time:
                    latest[w.id] = w
            rows = [await self._row(w) for w in latest.values()]
        except RPCError as err:
            return web.json_response({"conversations": [], "error": f"cannot list them: {err.message}"})
        rows.sort(key=lambda r: r["lastActivity"] or "", reverse=True)
        return web.json_response({"conversations": rows})

    async def _row(self, w: WorkflowExecution) -> dict[str, Any]:
        inp = await self._input(w)
        session_id, changed = None, None
        if inp is not None:
            context = Path(inp.context_file())
            session_id, changed = await asyncio.to_thread(self._session_of, context)
            if session_id is not None:
                self.console.known_files[session_id] = context
        last = max(t for t in (changed, w.close_time, w.start_time) if t is not None)
        owners = (await w.memo()).get(RUNNING_FOR) if w.status == WorkflowExecutionStatus.RUNNING else None
        return {
            "id": w.id,
            "channel": inp.channel if inp else None,
            "thread": inp.root_ts if inp and inp.context_mode == "thread" else None,
            "mode": inp.context_mode if inp else None,
            "workingDir": inp.working_dir if inp else None,
            "state": _state(w.status, owners),
            "for": [str(o) for o in owners] if isinstance(owners, list) else [],
            "lastActivity": last.isoformat(),
            "session": session_id,
        }


def _state(status: WorkflowExecutionStatus | None, owners: object) -> str:
    if status == WorkflowExecutionStatus.RUNNING:
        return "working" if owners else "idle"
    if status == WorkflowExecutionStatus.COMPLETED:
        return "closed"  # idle past TEMPI_SLACK_IDLE_CLOSE; the next message opens it again
    return status.name.lower() if status else "unknown"
