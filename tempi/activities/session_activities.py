"""The session workflow's activities: one LLM call, one tool call, one store flush.

Each is a thin shell over plain functions. All three are safe to retry: entries are keyed
by ids the workflow made, so a retried write is a no-op and a retried call that already
finished returns what it stored the first time.

The model call (`llm_call`), the tool runs (`tool_runs`) and the summaries
(`compaction_activities`) each live in their own module; this class gives them the worker's
store and credentials, hands the model call the tool run for an answer's reads
(`early_reads`), and lists them for the worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from tempi.activities.compaction_activities import CompactionActivities
from tempi.activities.file_turns import FileTurns, anchor_of, outbox_ids
from tempi.activities.llm_call import LlmCallActivities
from tempi.activities.model_options import CredentialResolver
from tempi.activities.out_of_space import out_of_space_is_final
from tempi.activities.session_outbox import write_outbox
from tempi.activities.spans import traced_tool_call
from tempi.activities.tool_runs import ToolRunActivities
from tempi.store.live_channel import remove_live_files
from tempi.store.session_store import SessionStore
from tempi.store.sidecar import live_path
from tempi.workflows import activity_names as names
from tempi.workflows.activity_payloads import FlushInput, ToolCallInput, ToolCallResult


class SessionActivities(LlmCallActivities, ToolRunActivities, CompactionActivities):
    def __init__(self, store: SessionStore, credentials: CredentialResolver) -> None:
        self.store = store
        self.credentials = credentials

    async def run_early_tool(self, inp: ToolCallInput) -> ToolCallResult:
        return await traced_tool_call(inp.tool_call.name, self._run_tool(inp))

    @activity.defn(name=names.FLUSH_ENTRIES)
    async def flush_entries(self, inp: FlushInput) -> None:
        turns = FileTurns(inp.file, outbox_ids(inp.outbox), anchor_of(inp.outbox, None))
        with out_of_space_is_final(inp.file.session_path):
            # Tool results left over from a run the file changed under go on tempi's own
            # branch; the next prompt moves onto the file's latest entry.
            outbox, _ = turns.continue_from_file(inp.outbox)
            write_outbox(self.store, inp.file, outbox)
            if outbox:
                turns.settle()
        remove_live_files(
            [live_path(inp.file.session_path, inp.file.session_id, key) for key in inp.finished_live_keys]
        )

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.call_llm,
            self.run_tool,
            self.run_user_bash,
            self.compact,
            self.summarize_branch,
            self.flush_entries,
        ]
