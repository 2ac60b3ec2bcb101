"""The agent loop's port in a workflow: LLM calls and tools as activities, sleeps as
timers, hand-offs as continue-as-new."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import ToolCall, ToolResultMessage, UserMessage
    from tempi.workflows.activity_payloads import LlmCallResult
    from tempi.workflows.session.compactor import CompactionReason, Compactor
    from tempi.workflows.session.entries import EntryWriter, now_ms
    from tempi.workflows.session.event_log import EventLog
    from tempi.workflows.session.extension_route import ExtensionTools
    from tempi.workflows.session.llm_call import LlmCaller
    from tempi.workflows.session.queues import MessageQueues, QueueName
    from tempi.workflows.session.run_control import RunControl
    from tempi.workflows.session.tool_routes import ToolRoutes, ToolSlot
    from tempi.workflows.session.tool_scheduler import ToolScheduler
    from tempi.workflows.session.user_bash import UserBash
    from tempi.workflows.session_types import CarriedState, RunHandoff, SessionConfig


HAND_OFF_PLANNED_ON_ANSWER = "handoff-planned-on-answer"


def continue_as_new_due(config: SessionConfig) -> bool:
    info = workflow.info()
    return (
        info.is_continue_as_new_suggested()
        or info.get_current_history_length() > config.history_event_budget
        or info.get_current_history_size() > config.history_bytes_budget
    )


class WorkflowPort:
    def __init__(
        self,
        *,
        config: SessionConfig,
        state: CarriedState,
        log: EventLog,
        entries: EntryWriter,
        queues: MessageQueues,
        control: RunControl,
        llm: LlmCaller,
        routes: ToolRoutes,
        compactor: Compactor,
        user_bash: UserBash,
        continue_as_new: Callable[[RunHandoff], None],
        extensions: ExtensionTools | None = None,
    ) -> None:
        self.config = config
        self.state = state
        self.log = log
        self.entries = entries
        self.queues = queues
        self.control = control
        self.llm = llm
        self.tools = ToolScheduler(config, self, routes)
        self.compactor = compactor
        self.user_bash = user_bash
        self.continue_as_new = continue_as_new
        self.extensions = extensions

    def emit(self, event: dict[str, Any]) -> int:
        return self.log.emit(event)

    def emit_live(self, event: dict[str, Any], key: str) -> None:
        self.log.emit(event)
        self.entries.live_keys.append(key)

    def now_ms(self) -> int:
        return now_ms()

    def begin_run(self) -> None:
        self.control.streaming = True

    def end_run(self) -> None:
        # A run that was handed off goes on, still streaming, in the next workflow run.
        if self.control.handed_off:
            return
        self.control.streaming = False
        self.user_bash.record_deferred()

    async def after_run(self) -> None:
        if self.extensions is not None:
            await self.extensions.run_ended()

    async def call_llm(self) -> LlmCallResult:
        return await self.llm.call()

    async def execute_tools(self, calls: list[ToolCall]) -> list[ToolResultMessage]:
        slots = self.llm.early_slots(calls, self.state.leaf_id, self.tools.routes)
        if slots is None:
            entry_ids = [self.entries.new_id() for _ in calls]
            parents = [self.state.leaf_id or "", *entry_ids[:-1]]
            slots = [ToolSlot(entry_id=e, parent_id=p) for e, p in zip(entry_ids, parents, strict=True)]
        with self.entries.writing_below_leaf():
            results = await self.tools.run(calls, slots)
            self.entries.place_tool_results(
                [(s.entry_id, s.parent_id) for s in slots],
                [None if r.parked else r.message.to_json_dict() for r in results],
            )
        if self.extensions is not None:
            # After the batch's results, so the entries extensions appended follow them.
            for r in results:
                self.extensions.apply(r.effects)
        return [r.message for r in results]

    def record_message(self, message: dict[str, Any]) -> None:
        self.entries.record_message(message)

    def abort_requested(self) -> bool:
        return self.control.abort_requested

    def has_steering(self) -> bool:
        return self.queues.has_steering()

    def has_follow_up(self) -> bool:
        return self.queues.has_follow_up()

    def take_messages(self, which: QueueName) -> list[UserMessage]:
        return self.queues.take(which)

    async def sleep_unless_aborted(self, delay_ms: int) -> bool:
        try:
            await workflow.wait_condition(
                lambda: self.control.abort_requested, timeout=timedelta(milliseconds=delay_ms)
            )
        except TimeoutError:
            return True
        return False

    async def compact(self, reason: CompactionReason, *, will_retry: bool) -> bool:
        return not isinstance(await self.compactor.compact_with_events(reason, will_retry=will_retry), str)

    def hand_off_planned(self) -> bool | None:
        # The history's length and which patches a replay knows of belong to the workflow
        # task the code runs in. A model's answer is an activity's result, which a replay
        # hands over in the same task as the first run did; a local tool's result may reach
        # the first run a task later than its replay, so what follows the tools cannot read
        # either. Runs begun before this decided after the tools, and replay that way.
        if not workflow.patched(HAND_OFF_PLANNED_ON_ANSWER):
            return None
        return continue_as_new_due(self.config)

    def should_hand_off(self, planned: bool | None) -> bool:
        if planned is not None:
            return planned
        # Runs that began before hand-offs existed replay without them.
        return continue_as_new_due(self.config) and workflow.patched("turn-handoff")

    async def hand_off(self, handoff: RunHandoff) -> None:
        """Continue a long run as new between two turns, so one prompt can go on for
        thousands of turns; returns if something in flight cannot move yet."""
        await self.entries.flush()
        if (
            self.entries.outbox
            or self.user_bash.deferred
            or self.user_bash.running is not None
            or self.control.background
            or self.control.abort_requested
            or not workflow.all_handlers_finished()
        ):
            return
        self.continue_as_new(handoff)
