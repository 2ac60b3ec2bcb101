"""pi's agent loop (agent-loop.ts with agent-session's retry and overflow recovery):
turns of one LLM call and its tool calls, steering taken between turns, follow-ups when
the run would stop. It acts only through its port, so it runs anywhere asyncio does."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import AssistantMessage, ToolResultMessage, UserMessage
    from tempi.workflows.activity_payloads import LlmCallResult
    from tempi.workflows.session.agent_port import AgentPort
    from tempi.workflows.session.compactor import over_threshold
    from tempi.workflows.session.queues import QueueName
    from tempi.workflows.session.texts import OVERFLOW_RECOVERY_FAILED, aborted_message
    from tempi.workflows.session_types import CarriedState, RetryPolicySettings, RunHandoff, SessionConfig


def retry_delay_ms(retry: RetryPolicySettings, result: LlmCallResult, attempt: int) -> int | None:
    """pi's backoff for a retryable provider error, stretched to the provider's retry-after;
    None when the error is not retried (any more)."""
    if (
        result.message.stop_reason != "error"
        or result.error_kind != "retryable"
        or not retry.enabled
        or attempt >= retry.max_retries
    ):
        return None
    delay = min(retry.base_delay_ms * (2**attempt), retry.max_delay_ms)
    if result.retry_after_ms is not None:
        delay = min(max(delay, result.retry_after_ms), max(retry.max_delay_ms, result.retry_after_ms))
    return delay


class AgentLoop:
    def __init__(self, port: AgentPort, config: SessionConfig, state: CarriedState) -> None:
        self.port = port
        self.config = config
        self.state = state
        self.last_message: AssistantMessage | None = None
        # Where the run's agent_start sits in the log; agent_end points readers there.
        self.run_start_offset = 0
        self.retry_attempt = 0
        self.overflow_compacted = False
        self.last_good: AssistantMessage | None = None

    async def run(self, first: list[UserMessage]) -> None:
        """Run the loop on `first`, or carry on with the run the previous workflow run
        handed off between two turns."""
        handoff, self.state.handoff = self.state.handoff, None
        self.port.begin_run()
        self.retry_attempt = 0
        if handoff is None:
            self.state.runs += 1
            self._agent_start()
        else:
            self.run_start_offset = handoff.run_start_offset
            self.last_message = handoff.last_good
        try:
            # Continuing a handed-off run: steering queued meanwhile opens the next turn.
            take_from: QueueName | None = "steering" if handoff and self.port.has_steering() else None
            self.overflow_compacted = handoff.overflow_compacted if handoff else False
            self.last_good = handoff.last_good if handoff else None
            finished = await self._turns(list(first), take_from)
            if finished:
                self._agent_end()
            await self.port.after_run()
            if not finished:
                return
            last_good = self.last_good
            if last_good is not None and over_threshold(last_good, self.state.model, self.config.compaction):
                await self.port.compact("threshold", will_retry=False)
        finally:
            self.port.end_run()

    async def _turns(self, pending: list[UserMessage], take_from: QueueName | None) -> bool:
        """Turns until nothing is left to do; False if the run already ended (with its
        agent_end) on an error, a failed recovery or an abort."""
        while True:
            has_more_tools = True
            force_llm = False
            while has_more_tools or pending or take_from or force_llm:
                force_llm = False
                self.port.emit({"type": "turn_start"})
                if take_from:
                    # pi announces the dequeue (queue_update) inside the new turn.
                    pending, take_from = self.port.take_messages(take_from), None
                for msg in pending:
                    self._add_message(msg.to_json_dict())
                    self.state.stats.user_messages += 1
                pending = []

                result = await self.port.call_llm()
                message = result.message
                self.last_message = message
                self._add_message(message.to_json_dict(), start_emitted=True)
                self.state.stats.assistant_messages += 1
                self.state.stats.usage = self.state.stats.usage.add(message.usage)

                if message.stop_reason in ("error", "aborted"):
                    self.port.emit({"type": "turn_end", "message": message.to_json_dict(), "toolResults": []})
                    self._agent_end()
                    if not await self._recover(result):
                        return False
                    self._agent_start()
                    force_llm = True
                    continue
                if self.retry_attempt > 0:
                    self.port.emit({"type": "auto_retry_end", "success": True, "attempt": self.retry_attempt})
                    self.retry_attempt = 0
                self.last_good = message

                calls = message.tool_calls()
                # Decided here, where the answer arrived, not after the tools: see
                # WorkflowPort.hand_off_planned.
                hand_off_planned = self.port.hand_off_planned() if calls else None
                self.state.stats.tool_calls += len(calls)
                has_more_tools = bool(calls)
                results: list[ToolResultMessage] = await self.port.execute_tools(calls) if calls else []
                result_dicts = [r.to_json_dict() for r in results]
                for r in result_dicts:
                    self.port.emit({"type": "message_start", "message": r})
                    self.port.emit({"type": "message_end", "message": r})
                    self.state.stats.tool_results += 1
                    self.state.message_count += 1
                self.port.emit(
                    {"type": "turn_end", "message": message.to_json_dict(), "toolResults": result_dicts}
                )
                if (
                    has_more_tools
                    and not self.port.abort_requested()
                    and self.port.should_hand_off(hand_off_planned)
                ):
                    await self.port.hand_off(
                        RunHandoff(
                            run_start_offset=self.run_start_offset,
                            overflow_compacted=self.overflow_compacted,
                            last_good=self.last_good,
                        )
                    )
                if self.port.abort_requested():
                    self._end_aborted()
                    return False
                take_from = "steering" if self.port.has_steering() else None
            if not self.port.has_follow_up():
                return True
            take_from = "follow_up"

    async def _recover(self, result: LlmCallResult) -> bool:
        """After a failed answer: True to ask the model again (after compacting an overflow,
        or after a backoff for a retryable error)."""
        if result.error_kind == "overflow" and not self.port.abort_requested():
            if not await self._recover_from_overflow():
                return False
            self.overflow_compacted = True
            return True
        message = result.message
        delay = (
            None
            if self.port.abort_requested()
            else retry_delay_ms(self.config.retry, result, self.retry_attempt)
        )
        if delay is None:
            if self.retry_attempt > 0:
                self._retry_failed(message.error_message or "")
            return False
        self.retry_attempt += 1
        self.port.emit(
            {
                "type": "auto_retry_start",
                "attempt": self.retry_attempt,
                "maxAttempts": self.config.retry.max_retries,
                "delayMs": delay,
                "errorMessage": message.error_message or "",
            }
        )
        if not await self.port.sleep_unless_aborted(delay):
            self._retry_failed("Retry cancelled")
            return False
        return True

    def _retry_failed(self, final_error: str) -> None:
        self.port.emit(
            {
                "type": "auto_retry_end",
                "success": False,
                "attempt": self.retry_attempt,
                "finalError": final_error,
            }
        )

    async def _recover_from_overflow(self) -> bool:
        """pi's overflow path: compact once and retry; a second overflow ends the run."""
        if self.overflow_compacted:
            self.port.emit(
                {
                    "type": "compaction_end",
                    "reason": "overflow",
                    "aborted": False,
                    "willRetry": False,
                    "errorMessage": OVERFLOW_RECOVERY_FAILED,
                }
            )
            return False
        if not self.config.compaction.enabled:
            return False
        return await self.port.compact("overflow", will_retry=True)

    def _end_aborted(self) -> None:
        # pi ends an aborted run with an aborted assistant message.
        self.port.emit({"type": "turn_start"})
        aborted = aborted_message(self.state.model, self.port.now_ms())
        self.last_message = aborted
        body = aborted.to_json_dict()
        self.port.record_message(body)
        self._add_message(body)
        self.port.emit({"type": "turn_end", "message": body, "toolResults": []})
        self._agent_end()

    def _add_message(self, message: dict[str, Any], *, start_emitted: bool = False) -> None:
        """Announce a message; user-side messages also become entries here, while assistant
        entries are written by the LLM call (or recorded by the caller)."""
        if not start_emitted:
            self.port.emit({"type": "message_start", "message": message})
        self.port.emit({"type": "message_end", "message": message})
        if message.get("role") != "assistant":
            self.port.record_message(message)
        self.state.message_count += 1

    def _agent_start(self) -> None:
        self.run_start_offset = self.port.emit({"type": "agent_start"})

    def _agent_end(self) -> None:
        # pi's agent_end lists every message of the run, which can be megabytes; the log
        # keeps a pointer and readers rebuild the list from the run's message_end events.
        self.port.emit({"type": "agent_end", "messages": [], "_messagesFrom": self.run_start_offset})
