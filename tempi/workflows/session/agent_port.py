"""The agent loop's port: everything the loop asks of the world. The workflow provides
the real one (activities, timers, the event log); tests provide fakes and run the loop
in plain asyncio."""

from __future__ import annotations

from typing import Any, Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import ToolCall, ToolResultMessage, UserMessage
    from tempi.workflows.activity_payloads import LlmCallResult
    from tempi.workflows.session.compactor import CompactionReason
    from tempi.workflows.session.queues import QueueName
    from tempi.workflows.session_types import RunHandoff


class AgentPort(Protocol):
    def emit(self, event: dict[str, Any]) -> int:
        """Append an event to the session's log; returns its global offset."""
        ...

    def now_ms(self) -> int: ...

    def begin_run(self) -> None:
        """The session is streaming from now on."""
        ...

    def end_run(self) -> None:
        """The run is over, unless it was handed off to the next workflow run."""
        ...

    async def after_run(self) -> None:
        """The run has ended (its agent_end is out) and is still streaming: what must
        happen before a client waiting for it sees it idle."""
        ...

    async def call_llm(self) -> LlmCallResult:
        """Stream the next assistant message: announce it (message_start) and return it
        finished, or as an error/aborted message when no answer came."""
        ...

    async def execute_tools(self, calls: list[ToolCall]) -> list[ToolResultMessage]:
        """Run one message's tool calls; results come back in call order."""
        ...

    def record_message(self, message: dict[str, Any]) -> None:
        """Add a message the loop made (user side, or an aborted answer) to the session tree."""
        ...

    def abort_requested(self) -> bool: ...

    def has_steering(self) -> bool: ...

    def has_follow_up(self) -> bool: ...

    def take_messages(self, which: QueueName) -> list[UserMessage]: ...

    async def sleep_unless_aborted(self, delay_ms: int) -> bool:
        """Wait; False if an abort cut the wait short."""
        ...

    async def compact(self, reason: CompactionReason, *, will_retry: bool) -> bool:
        """Compact the context, announcing it; True if it worked."""
        ...

    def hand_off_planned(self) -> bool | None:
        """Read as an answer with tool calls arrives: whether the run goes on in a fresh
        workflow run after those tools; None if that is only decided after them."""
        ...

    def should_hand_off(self, planned: bool | None) -> bool:
        """After the turn's tools: whether the run goes on in a fresh workflow run."""
        ...

    async def hand_off(self, handoff: RunHandoff) -> None:
        """Continue the run as new; returns if something in flight cannot move yet."""
        ...
