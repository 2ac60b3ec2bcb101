"""One LLM call: the activity streams the answer under a live key, writes the outbox and
the answer to the session file, and rebuilds the context from that file."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import AssistantMessage, ToolCall
    from tempi.agent.session_entries import iso_timestamp
    from tempi.agent.subagents import TASK_TOOL, task_tool_spec
    from tempi.agent.tool_specs import EARLY_TOOLS
    from tempi.workflows import activity_names as act
    from tempi.workflows.activity_payloads import LlmCallInput, LlmCallResult, ToolCallResult
    from tempi.workflows.session.activity_errors import cause
    from tempi.workflows.session.activity_options import Activities
    from tempi.workflows.session.entries import EntryWriter, now_ms
    from tempi.workflows.session.event_log import EventLog
    from tempi.workflows.session.extension_route import ExtensionTools
    from tempi.workflows.session.mcp_route import McpTools
    from tempi.workflows.session.run_control import RunControl
    from tempi.workflows.session.subagent_runner import SubagentRunner
    from tempi.workflows.session.texts import aborted_message, error_message
    from tempi.workflows.session.tool_routes import ToolRoutes, ToolSlot
    from tempi.workflows.session_types import CarriedState, SessionConfig


# An answer whose tool calls only read (read, ls) has them run by the model call's activity,
# which parks their results under ids the workflow passes it: the turn then needs no local
# activity, whose hand-overs and second activation cost about 5 ms (README, "Where a round
# trip goes"). Only where the builtin route would run them on this worker, calls run at once
# (not one by one with steering checked between), and no extension hooks tool calls.
EARLY_READS_PATCH = "reads-in-the-model-call"
# Ids made for each call: an answer reading more files than this has its reads run as before.
EARLY_READ_IDS = 4


class LlmCaller:
    def __init__(
        self,
        config: SessionConfig,
        state: CarriedState,
        log: EventLog,
        entries: EntryWriter,
        control: RunControl,
        subagents: SubagentRunner,
        activities: Activities,
        mcp: McpTools | None = None,
        extensions: ExtensionTools | None = None,
    ) -> None:
        self.config = config
        self.state = state
        self.log = log
        self.entries = entries
        self.control = control
        self.subagents = subagents
        self.activities = activities
        self.mcp = mcp
        self.extensions = extensions
        # The last answer's entry id, the ids passed for its reads and what ran early.
        self._early: tuple[str, list[str], list[ToolCallResult]] | None = None

    async def call(self) -> LlmCallResult:
        self._early = None
        if self.mcp is not None:
            await self.mcp.ensure_listed()
        system_prompt = self.config.system_prompt
        if self.extensions is not None:
            await self.extensions.ensure_loaded()
            system_prompt = await self.extensions.system_prompt(self._prompt_text())
        entry_id = self.entries.new_id()
        started_ms = now_ms()
        model = self.state.model
        start = AssistantMessage(
            content=[], api=model.api, provider=model.provider, model=model.id, timestamp=started_ms
        )
        self.log.emit({"type": "message_start", "message": start.to_json_dict(), "_live": entry_id})
        self.entries.live_keys.append(entry_id)
        if self.control.abort_requested:
            aborted = aborted_message(model, now_ms())
            self.entries.record_message(aborted.to_json_dict())
            return LlmCallResult(message=aborted)
        async with self.entries.store_lock:
            outbox = self.entries.take_outbox()
            inp = LlmCallInput(
                file=self.entries.file(),
                outbox=outbox,
                leaf_id=self.state.leaf_id,
                entry_id=entry_id,
                entry_timestamp=iso_timestamp(started_ms),
                model=model,
                thinking_level=self.state.thinking_level,
                system_prompt=system_prompt,
                tools=[t for t in self.config.tools if t != TASK_TOOL],
                extra_tools=[
                    *([task_tool_spec(self.subagents.agents())] if TASK_TOOL in self.config.tools else []),
                    *(self.mcp.specs() if self.mcp is not None else []),
                    *(self.extensions.specs() if self.extensions is not None else []),
                ],
                tool_labels=self.config.tool_labels,
                extensions=self.extensions.active() if self.extensions is not None else [],
                turn_index=self.extensions.next_turn() if self.extensions is not None else 0,
                early_read_ids=self._early_read_ids(),
            )
            task = asyncio.ensure_future(self.activities.execute(act.CALL_LLM, inp, LlmCallResult))
            with self.entries.writing_below_leaf():
                try:
                    result: LlmCallResult = await self.control.track(task)
                except (ActivityError, CancelledError, asyncio.CancelledError) as err:
                    self.entries.put_back(outbox)
                    model = self.state.model
                    message = (
                        aborted_message(model, now_ms())
                        if self.control.abort_requested
                        else error_message(model, cause(err), now_ms())
                    )
                    self.entries.place({"type": "message", "message": message.to_json_dict()}, entry_id)
                    return LlmCallResult(message=message)
                self.entries.written(entry_id)
        if self.extensions is not None:
            self.extensions.report(result.problems, "turn_start")
            self.extensions.apply(result.effects)
        if result.message.stop_reason != "error":
            self.state.last_assistant_text = result.message.text()
        self._early = (entry_id, inp.early_read_ids, result.early_results)
        return result

    def _early_read_ids(self) -> list[str]:
        may = (
            self.config.tool_execution == "parallel"
            and bool(EARLY_TOOLS.intersection(self.config.tools))
            and self.entries.file_ref.sandbox == "local"
            and (self.extensions is None or not self.extensions.active())
        )
        if not may or not workflow.patched(EARLY_READS_PATCH):
            return []
        return [self.entries.new_id() for _ in range(EARLY_READ_IDS)]

    def early_slots(
        self, calls: list[ToolCall], leaf_id: str | None, routes: ToolRoutes
    ) -> list[ToolSlot] | None:
        """The slots of the last answer's calls when its activity ran them all and they still
        go where it put them (below the answer, each on its builtin route); else None."""
        early, self._early = self._early, None
        if early is None:
            return None
        answer_id, ids, results = early
        if (
            leaf_id != answer_id
            or len(results) != len(calls)
            or any(
                r.message.tool_call_id != c.id or not routes.builtin_runs(c.name)
                for r, c in zip(results, calls, strict=True)
            )
        ):
            return None
        parents = [answer_id, *ids]
        return [
            ToolSlot(entry_id=ids[i], parent_id=parents[i], early=result) for i, result in enumerate(results)
        ]

    def _prompt_text(self) -> str:
        """The text of the newest user message about to be written: the run's prompt."""
        for entry in reversed(self.entries.queued_bodies()):
            message = entry.get("message") or {}
            if message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
        return ""
