"""One LLM call: the activity streams the answer under a live key, writes the outbox and
the answer to the session file, and rebuilds the context from that file."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import AssistantMessage
    from tempi.agent.session_entries import iso_timestamp
    from tempi.agent.subagents import TASK_TOOL, task_tool_spec
    from tempi.workflows import activity_names as act
    from tempi.workflows.activity_payloads import LlmCallInput, LlmCallResult
    from tempi.workflows.session.activity_errors import cause
    from tempi.workflows.session.activity_options import Activities
    from tempi.workflows.session.entries import EntryWriter, now_ms
    from tempi.workflows.session.event_log import EventLog
    from tempi.workflows.session.extension_route import ExtensionTools
    from tempi.workflows.session.mcp_route import McpTools
    from tempi.workflows.session.run_control import RunControl
    from tempi.workflows.session.subagent_runner import SubagentRunner
    from tempi.workflows.session.texts import aborted_message, error_message
    from tempi.workflows.session_types import CarriedState, SessionConfig


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

    async def call(self) -> LlmCallResult:
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
        return result

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
