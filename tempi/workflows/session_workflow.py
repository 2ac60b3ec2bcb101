"""AgentSessionWorkflow: one durable coding session, turn by turn, with pi's loop semantics.

The workflow decides; activities act. It keeps only what it decides with (leaf id, queues,
settings, counters) and an in-memory event log served by a query. The conversation lives
in the session store: the LLM activity rebuilds context from it, tool activities park
their results there, and every entry crosses history once.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import PurePosixPath
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    TimeoutType,
)
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import (
        AssistantMessage,
        TextContent,
        ToolCall,
        ToolResultMessage,
        UserMessage,
    )
    from tempi.agent.model_spec import ModelSpec, ThinkingLevel
    from tempi.agent.session_entries import iso_timestamp, sequential_entry_id
    from tempi.agent.subagents import (
        BUILTIN_AGENTS,
        PARALLEL_CONCURRENCY,
        TASK_TOOL,
        AgentDefinition,
        SubagentOutcome,
        format_task_result,
        parse_task_args,
        task_tool_spec,
    )
    from tempi.agent.tool_specs import is_read_only, mutated_path
    from tempi.workflows import activity_names as act
    from tempi.workflows.session_types import (
        BashRequest,
        BashResult,
        BranchSummaryInput,
        BranchSummaryResult,
        CarriedState,
        CompactActivityResult,
        CompactInput,
        CompactRequest,
        CompactResult,
        EventsPage,
        FlushInput,
        LlmCallInput,
        LlmCallResult,
        NavigateRequest,
        NavigateResult,
        OutboxItem,
        PromptRequest,
        QueueMode,
        RunHandoff,
        SandboxCreated,
        SandboxCreateInput,
        SandboxFinished,
        SandboxFinishInput,
        SandboxRef,
        SessionConfig,
        SessionFileRef,
        SessionInput,
        SessionStateView,
        SubagentInput,
        SubagentResult,
        ToolCallInput,
        ToolCallResult,
        UserBashInput,
        workflow_id_for,
    )

LLM_TIMEOUT = timedelta(minutes=15)
LLM_HEARTBEAT = timedelta(seconds=10)
TOOL_HEARTBEAT = timedelta(seconds=10)
STORE_TIMEOUT = timedelta(minutes=1)
IDLE_TIMEOUT = timedelta(days=7)
PAGE_BYTES = 1_000_000
CARRIED_EVENT_BYTES = 500_000  # continue-as-new input must stay well under 2 MB
# The activity retry below covers lost workers and store hiccups; provider errors come
# back as messages and follow pi's visible retry policy instead.
INFRA_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10), maximum_attempts=30
)

ABORTED_TEXT = "Aborted by the user."
SKIPPED_TEXT = "Not run: a user message was queued, so the remaining tool calls were skipped."
OVERFLOW_RECOVERY_FAILED = (
    "The context is still too large after compacting once, so the request was not retried. "
    "Start a new session, compact with a focus (/compact ...), or switch to a model with a larger context window."
)
LOST_BASH_TEXT = (
    "The worker running this command stopped before it reported back, so the command may or "
    "may not have completed. Check the workspace state before running it again."
)


def _sandbox_host_gone(pickup_s: float) -> str:
    return (
        f"The sandbox's host did not pick this up within {pickup_s:g} s, so its worker is probably "
        "gone. A fresh sandbox starts with the next tool call, from the workspace as last saved."
    )


@workflow.defn(name="AgentSessionWorkflow")
class AgentSessionWorkflow:
    @workflow.init
    def __init__(self, inp: SessionInput) -> None:
        cfg = inp.config
        self.config: SessionConfig = cfg
        self.state: CarriedState = inp.carried or CarriedState(
            leaf_id=cfg.resume_leaf_id,
            file_started=cfg.existing_file,
            model=cfg.model,
            thinking_level=cfg.thinking_level,
            steering_mode=cfg.steering_mode,
            follow_up_mode=cfg.follow_up_mode,
        )
        self.events: list[dict[str, Any]] = self.state.recent_events
        self.state.recent_events = []
        self.outbox: list[OutboxItem] = []
        self.live_keys: list[str] = []
        self.streaming = False
        self.abort_requested = False
        self.shutdown_requested = False
        self.in_flight: list[asyncio.Task[Any]] = []
        self.made_ids: set[str] = set()
        # User bash results that arrive during a run join the tree when the run ends.
        self.deferred_entries: list[dict[str, Any]] = []
        self.user_bash: asyncio.Future[Any] | None = None
        # Writers of the session file take turns, so entries land in tree order.
        self.store_lock = asyncio.Lock()
        self.run_start_offset = 0
        self.handed_off = False
        self.compacting = False
        self.children: dict[str, workflow.ChildWorkflowHandle[Any, Any]] = {}
        self.last_message: AssistantMessage | None = None
        self.background: set[asyncio.Future[Any]] = set()
        self.child_sessions: dict[str, list[dict[str, str]]] = {}
        self.file_ref = SessionFileRef(
            session_id=cfg.session_id,
            session_path=cfg.session_path,
            cwd=cfg.cwd,
            parent_session=cfg.parent_session,
            header_timestamp=cfg.created_at,
            sandbox=cfg.sandbox,
            existing_file=cfg.existing_file,
        )
        if self.state.sandbox is not None:
            self.file_ref.container_id = self.state.sandbox.container_id
        if inp.carried is None and not cfg.existing_file:
            self._record_entry(
                {"type": "model_change", "provider": cfg.model.provider, "modelId": cfg.model.id}
            )
            self._record_entry({"type": "thinking_level_change", "thinkingLevel": cfg.thinking_level})

    # --- run ----------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: SessionInput) -> str:
        if self.state.handoff is not None:
            await self._run_agent([])
            await self._end_prompt()
        while True:
            ready = await self._wait_for_work()
            if not ready or self.shutdown_requested:
                await self._flush()
                await self._finish_sandbox(want_patch=False)
                return "idle" if not ready else "shutdown"
            if not self.state.prompts:
                await self._flush()  # settings changed or a user command ran while idle
                continue
            prompt = self.state.prompts.pop(0)
            self.abort_requested = False
            await self._run_agent([prompt])
            await self._end_prompt()

    async def _end_prompt(self) -> None:
        await self._flush()
        if self._should_continue_as_new() and not self.outbox:
            await workflow.wait_condition(workflow.all_handlers_finished)
            self._continue_as_new(None)

    async def _hand_off(self, handoff: RunHandoff) -> None:
        """Continue a long run as new between two turns, so one prompt can go on for
        thousands of turns; returns if something in flight cannot move yet."""
        await self._flush()
        if (
            self.outbox
            or self.deferred_entries
            or self.user_bash is not None
            or self.background
            or self.abort_requested
            or not workflow.all_handlers_finished()
        ):
            return
        self._continue_as_new(handoff)

    def _continue_as_new(self, handoff: RunHandoff | None) -> NoReturn:
        # The old run answers queries after it closes (by replay), so its own state
        # must not change here: the next run gets an updated copy.
        tail = self._log_tail()
        carried = self.state.model_copy(
            update={
                "event_offset": self.state.event_offset + len(self.events) - len(tail),
                "recent_events": tail,
                "handoff": handoff,
            }
        )
        self.handed_off = handoff is not None
        workflow.continue_as_new(self._next_run_input(carried))

    def _next_run_input(self, carried: CarriedState) -> Any:
        return SessionInput(config=self.config, carried=carried)

    async def _wait_for_work(self) -> bool:
        try:
            await workflow.wait_condition(
                lambda: bool(self.state.prompts) or self.shutdown_requested or self._idle_writes_waiting(),
                timeout=IDLE_TIMEOUT,
            )
        except TimeoutError:
            return False
        return True

    def _log_tail(self) -> list[dict[str, Any]]:
        """The newest events, up to CARRIED_EVENT_BYTES, to hand to the next run."""
        budget, start = CARRIED_EVENT_BYTES, len(self.events)
        while start > 0 and budget - _approx_size(self.events[start - 1]) > 0:
            start -= 1
            budget -= _approx_size(self.events[start])
        return self.events[start:]

    def _idle_writes_waiting(self) -> bool:
        # Like pi, nothing reaches the file before the first assistant message.
        return bool(self.outbox) and self.state.file_started and not self.streaming

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > self.config.history_event_budget
            or info.get_current_history_size() > self.config.history_bytes_budget
        )

    # --- the agent loop (pi's semantics) ---------------------------------------------

    async def _run_agent(self, first: list[UserMessage]) -> None:
        """Run pi's agent loop on `first`, or carry on with the run the previous
        workflow run handed off between two turns."""
        handoff, self.state.handoff = self.state.handoff, None
        self.streaming = True
        pending = list(first)
        retry_attempt = 0
        if handoff is None:
            self.state.runs += 1
            self._emit_agent_start()
        else:
            self.run_start_offset = handoff.run_start_offset
            self.last_message = handoff.last_good
        try:
            # The queue to take the next turn's user messages from.
            take_from: str | None = "steering" if handoff and self._has_steering() else None
            overflow_compacted = handoff.overflow_compacted if handoff else False
            last_good: AssistantMessage | None = handoff.last_good if handoff else None
            while True:
                has_more_tools = True
                force_llm = False
                while has_more_tools or pending or take_from or force_llm:
                    force_llm = False
                    self._emit({"type": "turn_start"})
                    if take_from:
                        # pi announces the dequeue (queue_update) inside the new turn.
                        pending, take_from = self._dequeue(take_from), None
                    for msg in pending:
                        self._add_message(msg.to_json_dict())
                        self.state.stats.user_messages += 1
                    pending = []

                    result = await self._call_llm()
                    message = result.message
                    self.last_message = message
                    self._add_message(message.to_json_dict(), start_emitted=True)
                    self.state.stats.assistant_messages += 1
                    self.state.stats.usage = self.state.stats.usage.add(message.usage)

                    if message.stop_reason in ("error", "aborted"):
                        self._emit({"type": "turn_end", "message": message.to_json_dict(), "toolResults": []})
                        self._emit_agent_end()
                        if result.error_kind == "overflow" and not self.abort_requested:
                            if not await self._recover_from_overflow(overflow_compacted):
                                return
                            overflow_compacted = True
                            self._emit_agent_start()
                            force_llm = True
                            continue
                        delay = self._retry_delay_ms(result, retry_attempt)
                        if delay is None:
                            if retry_attempt > 0:
                                self._emit(
                                    {
                                        "type": "auto_retry_end",
                                        "success": False,
                                        "attempt": retry_attempt,
                                        "finalError": message.error_message or "",
                                    }
                                )
                            return
                        retry_attempt += 1
                        self._emit(
                            {
                                "type": "auto_retry_start",
                                "attempt": retry_attempt,
                                "maxAttempts": self.config.retry.max_retries,
                                "delayMs": delay,
                                "errorMessage": message.error_message or "",
                            }
                        )
                        if not await self._sleep_unless_aborted(delay):
                            self._emit(
                                {
                                    "type": "auto_retry_end",
                                    "success": False,
                                    "attempt": retry_attempt,
                                    "finalError": "Retry cancelled",
                                }
                            )
                            return
                        self._emit_agent_start()
                        force_llm = True
                        continue
                    if retry_attempt > 0:
                        self._emit({"type": "auto_retry_end", "success": True, "attempt": retry_attempt})
                        retry_attempt = 0
                    last_good = message

                    calls = message.tool_calls()
                    has_more_tools = bool(calls)
                    results: list[ToolResultMessage] = []
                    if calls:
                        results = await self._execute_tools(calls)
                    result_dicts = [r.to_json_dict() for r in results]
                    for r in result_dicts:
                        self._emit({"type": "message_start", "message": r})
                        self._emit({"type": "message_end", "message": r})
                        self.state.stats.tool_results += 1
                        self.state.message_count += 1
                    self._emit(
                        {"type": "turn_end", "message": message.to_json_dict(), "toolResults": result_dicts}
                    )
                    if (
                        has_more_tools
                        and not self.abort_requested
                        and self._should_continue_as_new()
                        # Runs that began before hand-offs existed replay without them.
                        and workflow.patched("turn-handoff")
                    ):
                        await self._hand_off(
                            RunHandoff(
                                run_start_offset=self.run_start_offset,
                                overflow_compacted=overflow_compacted,
                                last_good=last_good,
                            )
                        )
                    if self.abort_requested:
                        # pi ends an aborted run with an aborted assistant message.
                        self._emit({"type": "turn_start"})
                        aborted = self._aborted_message()
                        self.last_message = aborted
                        self._record_entry({"type": "message", "message": aborted.to_json_dict()})
                        self._add_message(aborted.to_json_dict())
                        self._emit({"type": "turn_end", "message": aborted.to_json_dict(), "toolResults": []})
                        self._emit_agent_end()
                        return
                    take_from = "steering" if self._has_steering() else None
                if not self.state.follow_up:
                    break
                take_from = "follow_up"
            self._emit_agent_end()
            if last_good is not None and self._over_threshold(last_good):
                await self._compact_with_events("threshold")
        finally:
            # A run that was handed off goes on, still streaming, in the next workflow run.
            if not self.handed_off:
                self._finish_run()

    def _finish_run(self) -> None:
        self.streaming = False
        for body in self.deferred_entries:
            self._record_entry(body)
        self.deferred_entries = []

    # --- compaction --------------------------------------------------------------------

    def _auto_compaction(self) -> bool:
        return self.config.compaction.enabled

    def _over_threshold(self, message: AssistantMessage) -> bool:
        u = message.usage
        tokens = u.total_tokens or (u.input + u.output + u.cache_read + u.cache_write)
        window = self.state.model.context_window
        return self._auto_compaction() and tokens > window - self.config.compaction.reserve_tokens

    async def _recover_from_overflow(self, already_compacted: bool) -> bool:
        """pi's overflow path: compact once and retry; a second overflow ends the run."""
        if already_compacted:
            self._emit(
                {
                    "type": "compaction_end",
                    "reason": "overflow",
                    "aborted": False,
                    "willRetry": False,
                    "errorMessage": OVERFLOW_RECOVERY_FAILED,
                }
            )
            return False
        if not self._auto_compaction():
            return False
        return not isinstance(await self._compact_with_events("overflow", will_retry=True), str)

    async def _compact_with_events(
        self, reason: str, custom_instructions: str | None = None, *, will_retry: bool = False
    ) -> CompactResult | str:
        """Compact, announcing it; returns the result or the error text."""
        self._emit({"type": "compaction_start", "reason": reason})
        result = await self._compact(reason, custom_instructions)
        if result.outcome is None:
            self._emit(
                {
                    "type": "compaction_end",
                    "reason": reason,
                    "aborted": result.aborted,
                    "willRetry": False,
                    "errorMessage": result.error or "Compaction failed.",
                }
            )
            return result.error or "Compaction failed."
        self._emit(
            {
                "type": "compaction_end",
                "reason": reason,
                "result": result.outcome.to_json_dict(),
                "aborted": False,
                "willRetry": will_retry,
            }
        )
        return result.outcome

    async def _compact(self, reason: str, custom_instructions: str | None) -> CompactActivityResult:
        entry_id = self._new_id()
        self.compacting = True
        try:
            async with self.store_lock:
                outbox, self.outbox = self.outbox, []
                task = asyncio.ensure_future(
                    workflow.execute_activity(
                        act.COMPACT,
                        CompactInput(
                            file=self._file(),
                            outbox=outbox,
                            leaf_id=self.state.leaf_id,
                            model=self.state.model,
                            thinking_level=self.state.thinking_level,
                            policy=self.config.compaction,
                            custom_instructions=custom_instructions,
                            entry_id=entry_id,
                            entry_timestamp=iso_timestamp(self._now_ms()),
                            reason=reason,  # type: ignore[arg-type]
                        ),
                        result_type=CompactActivityResult,
                        start_to_close_timeout=LLM_TIMEOUT,
                        heartbeat_timeout=LLM_HEARTBEAT,
                        retry_policy=INFRA_RETRY,
                        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                    )
                )
                try:
                    result: CompactActivityResult = await self._track(task)
                except (ActivityError, CancelledError, asyncio.CancelledError) as err:
                    self.outbox = outbox + self.outbox
                    return CompactActivityResult(
                        error=f"Compaction failed: {_cause(err)}", aborted=self.abort_requested
                    )
                if result.outcome is not None:
                    self.state.leaf_id = entry_id
                    self.state.file_started = True
                    self.file_ref.existing_file = True
                return result
        finally:
            self.compacting = False

    def _retry_delay_ms(self, result: LlmCallResult, attempt: int) -> int | None:
        retry = self.config.retry
        if (
            self.abort_requested
            or result.message.stop_reason != "error"
            or result.error_kind != "retryable"
            or not retry.enabled
            or attempt >= retry.max_retries
        ):
            return None
        delay = min(retry.base_delay_ms * (2**attempt), retry.max_delay_ms)
        if result.retry_after_ms is not None:
            delay = min(max(delay, result.retry_after_ms), max(retry.max_delay_ms, result.retry_after_ms))
        return delay

    async def _sleep_unless_aborted(self, delay_ms: int) -> bool:
        try:
            await workflow.wait_condition(
                lambda: self.abort_requested, timeout=timedelta(milliseconds=delay_ms)
            )
        except TimeoutError:
            return True
        return False

    # --- LLM -------------------------------------------------------------------------

    async def _call_llm(self) -> LlmCallResult:
        entry_id = self._new_id()
        now_ms = self._now_ms()
        model = self.state.model
        start = AssistantMessage(
            content=[], api=model.api, provider=model.provider, model=model.id, timestamp=now_ms
        )
        self._emit({"type": "message_start", "message": start.to_json_dict(), "_live": entry_id})
        self.live_keys.append(entry_id)
        if self.abort_requested:
            aborted = self._aborted_message()
            self._record_entry({"type": "message", "message": aborted.to_json_dict()})
            return LlmCallResult(message=aborted)
        async with self.store_lock:
            outbox, self.outbox = self.outbox, []
            call = LlmCallInput(
                file=self._file(),
                outbox=outbox,
                leaf_id=self.state.leaf_id,
                entry_id=entry_id,
                entry_timestamp=iso_timestamp(now_ms),
                model=model,
                thinking_level=self.state.thinking_level,
                system_prompt=self.config.system_prompt,
                tools=[t for t in self.config.tools if t != TASK_TOOL],
                extra_tools=[task_tool_spec(self._agents())] if TASK_TOOL in self.config.tools else [],
            )
            task = asyncio.ensure_future(
                workflow.execute_activity(
                    act.CALL_LLM,
                    call,
                    result_type=LlmCallResult,
                    start_to_close_timeout=LLM_TIMEOUT,
                    heartbeat_timeout=LLM_HEARTBEAT,
                    retry_policy=INFRA_RETRY,
                    cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                )
            )
            try:
                result = await self._track(task)
            except (ActivityError, CancelledError, asyncio.CancelledError) as err:
                # No answer came back; the outbox may not have been written, so it goes
                # out again (writes are idempotent) ahead of the message that ends the turn.
                self.outbox = outbox + self.outbox
                message = (
                    self._aborted_message() if self.abort_requested else self._error_message(_cause(err))
                )
                self._record_entry({"type": "message", "message": message.to_json_dict()}, entry_id=entry_id)
                return LlmCallResult(message=message)
        self.state.file_started = True
        self.file_ref.existing_file = True
        self.state.leaf_id = entry_id
        self.made_ids.add(entry_id)
        if result.message.stop_reason != "error":
            self.state.last_assistant_text = result.message.text()
        return result

    # --- tools -------------------------------------------------------------------------

    async def _execute_tools(self, calls: list[ToolCall]) -> list[ToolResultMessage]:
        entry_ids = [self._new_id() for _ in calls]
        parents = [self.state.leaf_id or "", *entry_ids[:-1]]
        results: list[ToolResultMessage | None] = [None] * len(calls)
        inline: set[int] = set()
        runnable: list[int] = []
        # Prepare in source order, as pi does: a call to a tool this session lacks is
        # answered at once; the rest then run.
        for i, call in enumerate(calls):
            self._emit(
                {
                    "type": "tool_execution_start",
                    "toolCallId": call.id,
                    "toolName": call.name,
                    "args": call.arguments,
                    "_live": call.id,
                }
            )
            self.live_keys.append(call.id)
            if call.name not in self.config.tools:
                available = ", ".join(self.config.tools) or "none"
                refusal = self._synthetic_result(
                    call, f"Unknown tool {call.name!r}. Available tools: {available}."
                )
                results[i] = refusal
                inline.add(i)
                self._emit_tool_end(call, refusal)
            else:
                runnable.append(i)

        queue: str | None = None
        sandbox_error: str | None = None
        if any(calls[i].name != TASK_TOOL for i in runnable):
            try:
                queue = await self._sandbox_queue()
            except ActivityError as err:
                sandbox_error = f"Could not start the docker sandbox: {_cause(err)}"

        async def run_one(i: int) -> None:
            if calls[i].name == TASK_TOOL:
                msg, parked = await self._run_task(calls[i]), False
            elif sandbox_error is not None:
                msg, parked = self._synthetic_result(calls[i], sandbox_error), False
            else:
                msg, parked = await self._run_tool(calls[i], entry_ids[i], parents[i], queue)
            results[i] = msg
            if not parked:
                inline.add(i)
            self._emit_tool_end(calls[i], msg)

        if self.config.tool_execution == "sequential":
            for i in runnable:
                if self._has_steering() or self.abort_requested:
                    skipped = self._synthetic_result(
                        calls[i], ABORTED_TEXT if self.abort_requested else SKIPPED_TEXT
                    )
                    results[i] = skipped
                    inline.add(i)
                    self._emit_tool_end(calls[i], skipped)
                    continue
                await run_one(i)
        else:
            # Parallel, except that writes and edits of one file keep their source order.
            last_for_path: dict[str, asyncio.Future[None]] = {}
            tasks: list[asyncio.Future[None]] = []
            for i in runnable:
                call = calls[i]
                path = mutated_path(call.name, call.arguments)
                before = last_for_path.get(path) if path else None
                fut = asyncio.ensure_future(self._after(before, functools.partial(run_one, i)))
                if path:
                    last_for_path[path] = fut
                tasks.append(fut)
            await asyncio.gather(*tasks)

        final: list[ToolResultMessage] = []
        for i, result in enumerate(results):
            assert result is not None
            if i in inline:
                entry = {"type": "message", "message": result.to_json_dict()}
                self.outbox.append(OutboxItem(entry=self._entry(entry, entry_ids[i], parents[i])))
            else:
                self.outbox.append(OutboxItem(pending_id=entry_ids[i]))
            final.append(result)
        self.state.leaf_id = entry_ids[-1]
        self.made_ids.update(entry_ids)
        return final

    def _emit_tool_end(self, call: ToolCall, msg: ToolResultMessage) -> None:
        self._emit(
            {
                "type": "tool_execution_end",
                "toolCallId": call.id,
                "toolName": call.name,
                "result": _tool_output(msg),
                "isError": msg.is_error,
            }
        )

    @staticmethod
    async def _after(before: asyncio.Future[None] | None, fn: Callable[[], Awaitable[None]]) -> None:
        if before is not None:
            await asyncio.wait([before])
        await fn()

    async def _run_tool(
        self, call: ToolCall, entry_id: str, parent_id: str, queue: str | None
    ) -> tuple[ToolResultMessage, bool]:
        """Returns the result and whether the activity parked it in the store."""
        if self.abort_requested:
            return self._synthetic_result(call, ABORTED_TEXT), False
        now_ms = self._now_ms()
        inp = ToolCallInput(
            file=self._file(),
            tool_call=call,
            entry_id=entry_id,
            parent_id=parent_id,
            entry_timestamp=iso_timestamp(now_ms),
            timestamp_ms=now_ms,
        )
        runs_commands = not is_read_only(call.name) and mutated_path(call.name, call.arguments) is None
        retry = RetryPolicy(maximum_attempts=1) if runs_commands else INFRA_RETRY
        task = asyncio.ensure_future(
            workflow.execute_activity(
                act.RUN_TOOL,
                inp,
                result_type=ToolCallResult,
                task_queue=queue,
                # A sandbox host that is gone never picks the task up: say so instead of waiting.
                schedule_to_start_timeout=self._sandbox_pickup() if queue else None,
                start_to_close_timeout=timedelta(hours=12),
                heartbeat_timeout=TOOL_HEARTBEAT,
                retry_policy=retry,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
        )
        try:
            result = await self._track(task)
        except (ActivityError, CancelledError, asyncio.CancelledError) as err:
            if self.abort_requested:
                return self._synthetic_result(call, ABORTED_TEXT), False
            if queue and _never_started(err):
                self._forget_sandbox()
                return self._synthetic_result(call, _sandbox_host_gone(self.config.sandbox_pickup_s)), False
            if _is_disk_full(err):
                text = _cause(err)
            else:
                text = LOST_BASH_TEXT if runs_commands else f"The tool failed: {_cause(err)}"
            return self._synthetic_result(call, text), False
        if result.sandbox_lost:
            self._forget_sandbox()
            return result.message, False
        return result.message, True

    # --- docker sandbox ---------------------------------------------------------------------

    async def _sandbox_queue(self) -> str | None:
        """The task queue of the host running this session's container, creating it first."""
        if self.config.sandbox != "docker":
            return None
        if self.state.sandbox is None:
            created: SandboxCreated = await workflow.execute_activity(
                act.CREATE_SANDBOX,
                SandboxCreateInput(
                    session_id=self.config.session_id,
                    session_path=self.config.session_path,
                    image=self.config.sandbox_image,
                    workspace=self.config.cwd,
                    copy_from=self.config.workspace_copy_from,
                    network=self.config.sandbox_network,
                ),
                result_type=SandboxCreated,
                start_to_close_timeout=timedelta(minutes=5),
                retry_policy=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=2)),
            )
            self.state.sandbox = SandboxRef(container_id=created.container_id, task_queue=created.task_queue)
        self.file_ref.container_id = self.state.sandbox.container_id
        return self.state.sandbox.task_queue

    def _sandbox_pickup(self) -> timedelta:
        return timedelta(seconds=self.config.sandbox_pickup_s)

    def _forget_sandbox(self) -> None:
        self.state.sandbox = None
        self.file_ref.container_id = None

    async def _finish_sandbox(self, want_patch: bool) -> str | None:
        """Remove the session's container (a subagent's patch is collected first)."""
        sandbox = self.state.sandbox
        if sandbox is None:
            return None
        try:
            finished: SandboxFinished = await workflow.execute_activity(
                act.FINISH_SANDBOX,
                SandboxFinishInput(
                    session_id=self.config.session_id,
                    container_id=sandbox.container_id,
                    want_patch=want_patch,
                ),
                result_type=SandboxFinished,
                task_queue=sandbox.task_queue,
                schedule_to_start_timeout=self._sandbox_pickup(),
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
        except ActivityError:
            return None
        finally:
            self._forget_sandbox()
        return finished.patch

    # --- subagents -----------------------------------------------------------------------

    def _agents(self) -> list[AgentDefinition]:
        named = {a.name for a in self.config.agents}
        return [*self.config.agents, *(a for a in BUILTIN_AGENTS if a.name not in named)]

    async def _run_task(self, call: ToolCall) -> ToolResultMessage:
        agents = self._agents()
        try:
            args = parse_task_args(call.arguments, agents)
        except ValueError as err:
            return self._synthetic_result(call, str(err))
        by_name = {a.name: a for a in agents}
        items = args.items()
        outcomes: list[SubagentOutcome | None] = [None] * len(items)

        def progress() -> None:
            done = sum(o is not None for o in outcomes)
            self._emit(
                {
                    "type": "tool_execution_update",
                    "toolCallId": call.id,
                    "toolName": call.name,
                    "args": call.arguments,
                    "partialResult": {
                        "content": [
                            {"type": "text", "text": f"{done}/{len(items)} subagent task(s) finished"}
                        ],
                        "details": {
                            "mode": args.mode,
                            "children": list(self.child_sessions.get(call.id, [])),
                        },
                    },
                }
            )

        async def run(i: int, previous: str | None) -> SubagentOutcome:
            item = items[i]
            task = item.task.replace("{previous}", previous or "")
            outcome = await self._run_child(call.id, by_name[item.agent], task, progress)
            outcomes[i] = outcome
            progress()
            return outcome

        if args.mode == "chain":
            previous: str | None = None
            for i in range(len(items)):
                result = await run(i, previous)
                if result.stop_reason in ("error", "aborted") or self.abort_requested:
                    break
                previous = result.text
        else:
            limit = asyncio.Semaphore(PARALLEL_CONCURRENCY)

            async def bounded(i: int) -> None:
                async with limit:
                    if not self.abort_requested:
                        await run(i, None)

            await asyncio.gather(*(bounded(i) for i in range(len(items))))
        finished = [o for o in outcomes if o is not None]
        text, failed = format_task_result(args.mode, finished)
        if len(finished) < len(items):
            failed = True
            text += f"\n\n{len(items) - len(finished)} task(s) did not run."
        return ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=[TextContent(text=text)],
            details={"mode": args.mode, "results": [o.to_json_dict() for o in finished]},
            is_error=failed,
            timestamp=self._now_ms(),
        )

    async def _run_child(
        self, call_id: str, agent: AgentDefinition, task: str, progress: Callable[[], None]
    ) -> SubagentOutcome:
        child_id = str(workflow.uuid4())
        created = iso_timestamp(self._now_ms())
        stamp = created.replace(":", "-").replace(".", "-")
        tools = [t for t in (agent.tools or self.config.tools) if t != TASK_TOOL]
        config = self.config.model_copy(
            update={
                "session_id": child_id,
                "session_path": str(
                    PurePosixPath(self.config.session_path).parent / f"{stamp}_{child_id}.jsonl"
                ),
                "model": agent.model or self.state.model,
                "thinking_level": self.state.thinking_level,
                "system_prompt": f"{agent.system_prompt}\n\nWorking directory: {self.config.cwd}",
                "tools": tools,
                "parent_session": self.config.session_path,
                "agents": [],
                "created_at": created,
                "resume_leaf_id": None,
                "existing_file": False,
                # In docker a child works on its own copy and hands back a patch.
                "workspace_copy_from": self.config.cwd if self.config.sandbox == "docker" else None,
            }
        )
        handle = await workflow.start_child_workflow(
            "SubagentWorkflow",
            SubagentInput(session=SessionInput(config=config), task=task),
            id=workflow_id_for(child_id),
            task_queue=workflow.info().task_queue,
            result_type=SubagentResult,
            parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
        )
        self.children[child_id] = handle
        self.child_sessions.setdefault(call_id, []).append(
            {"sessionId": child_id, "sessionFile": config.session_path, "agent": agent.name}
        )
        progress()
        try:
            result: SubagentResult = await handle
        except ChildWorkflowError as err:
            result = SubagentResult(
                text="", stop_reason="error", error_message=_cause(err), session_file=config.session_path
            )
        finally:
            self.children.pop(child_id, None)
        self.state.stats.usage = self.state.stats.usage.add(result.usage)
        return SubagentOutcome(
            agent=agent.name,
            task=task,
            session_id=child_id,
            session_file=result.session_file,
            text=result.text,
            stop_reason=result.stop_reason,
            error_message=result.error_message,
            usage=result.usage.to_json_dict(),
            patch=result.patch,
        )

    def _synthetic_result(self, call: ToolCall, text: str) -> ToolResultMessage:
        return ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=[TextContent(text=text)],
            details={},
            is_error=True,
            timestamp=self._now_ms(),
        )

    async def _track(self, task: asyncio.Future[Any]) -> Any:
        self.in_flight.append(task)  # type: ignore[arg-type]
        try:
            return await task
        finally:
            self.in_flight.remove(task)  # type: ignore[arg-type]

    # --- store -------------------------------------------------------------------------

    async def _flush(self) -> None:
        if not self.outbox and not self.live_keys:
            return
        async with self.store_lock:
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        outbox, self.outbox = self.outbox, []
        keys, self.live_keys = self.live_keys, []
        try:
            await workflow.execute_activity(
                act.FLUSH_ENTRIES,
                FlushInput(file=self._file(), outbox=outbox, finished_live_keys=keys),
                start_to_close_timeout=STORE_TIMEOUT,
                retry_policy=INFRA_RETRY,
            )
        except ActivityError:
            # The entries stay queued and go out with the next write; nothing is lost.
            self.outbox = outbox + self.outbox
            self.live_keys = keys + self.live_keys
            return
        if outbox:
            self.state.file_started = True
            self.file_ref.existing_file = True

    def _file(self) -> SessionFileRef:
        return self.file_ref.model_copy()

    def _entry(self, body: dict[str, Any], entry_id: str, parent_id: str | None) -> dict[str, Any]:
        return {
            "type": body["type"],
            "id": entry_id,
            "parentId": parent_id or None,
            "timestamp": iso_timestamp(self._now_ms()),
            **{k: v for k, v in body.items() if k != "type"},
        }

    def _record_entry(self, body: dict[str, Any], entry_id: str | None = None) -> str:
        """Queue a workflow-made entry as the new leaf."""
        entry_id = entry_id or self._new_id()
        self.outbox.append(OutboxItem(entry=self._entry(body, entry_id, self.state.leaf_id)))
        self.state.leaf_id = entry_id
        self.made_ids.add(entry_id)
        return entry_id

    def _add_message(
        self,
        message: dict[str, Any],
        *,
        start_emitted: bool = False,
    ) -> None:
        """Emit a message's events; user-side messages also become entries here, while
        assistant entries are written by the LLM activity (or recorded by the caller)."""
        if not start_emitted:
            self._emit({"type": "message_start", "message": message})
        self._emit({"type": "message_end", "message": message})
        if message.get("role") != "assistant":
            self._record_entry({"type": "message", "message": message})
        self.state.message_count += 1

    # --- queues --------------------------------------------------------------------------

    def _has_steering(self) -> bool:
        return bool(self.state.steering)

    def _dequeue(self, which: str) -> list[UserMessage]:
        queue = self.state.steering if which == "steering" else self.state.follow_up
        mode: QueueMode = self.state.steering_mode if which == "steering" else self.state.follow_up_mode
        if not queue:
            return []
        taken = list(queue) if mode == "all" else [queue[0]]
        del queue[: len(taken)]
        self._emit_queue()
        return taken

    def _emit_queue(self) -> None:
        self._emit(
            {
                "type": "queue_update",
                "steering": [m.text() for m in self.state.steering],
                "followUp": [m.text() for m in self.state.follow_up],
            }
        )

    # --- helpers -------------------------------------------------------------------------

    def _emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def _emit_agent_start(self) -> None:
        self.run_start_offset = self.state.event_offset + len(self.events)
        self._emit({"type": "agent_start"})

    def _emit_agent_end(self) -> None:
        # pi's agent_end lists every message of the run, which can be megabytes; the log
        # keeps a pointer and readers rebuild the list from the run's message_end events.
        self._emit({"type": "agent_end", "messages": [], "_messagesFrom": self.run_start_offset})

    def _now_ms(self) -> int:
        return int(workflow.now().timestamp() * 1000)

    def _new_id(self) -> str:
        while True:
            if workflow.patched("sequential-entry-ids"):
                # Random ids could repeat one from an earlier run, which the store
                # would then take for a retried write and drop.
                if self.state.entry_id_seed is None:
                    self.state.entry_id_seed = workflow.random().getrandbits(32)
                candidate = sequential_entry_id(self.state.entry_id_seed, self.state.entry_ids_made)
                self.state.entry_ids_made += 1
            else:
                candidate = workflow.uuid4().hex[:8]
            if candidate not in self.made_ids:
                self.made_ids.add(candidate)
                return candidate

    def _aborted_message(self) -> AssistantMessage:
        model = self.state.model
        return AssistantMessage(
            content=[],
            api=model.api,
            provider=model.provider,
            model=model.id,
            stop_reason="aborted",
            error_message=ABORTED_TEXT,
            timestamp=self._now_ms(),
        )

    def _error_message(self, text: str) -> AssistantMessage:
        message = self._aborted_message()
        message.stop_reason = "error"
        message.error_message = text
        return message

    def _user_message(self, req: PromptRequest) -> UserMessage:
        content: list[Any] = [TextContent(text=req.message), *req.images]
        return UserMessage(content=content, timestamp=self._now_ms())

    # --- messages from clients ---------------------------------------------------------

    @workflow.update
    async def prompt(self, req: PromptRequest) -> None:
        message = self._user_message(req)
        if self.streaming and req.streaming_behavior == "steer":
            self.state.steering.append(message)
            self._emit_queue()
        elif self.streaming and req.streaming_behavior == "followUp":
            self.state.follow_up.append(message)
            self._emit_queue()
        else:
            self.state.prompts.append(message)

    @prompt.validator
    def _validate_prompt(self, req: PromptRequest) -> None:
        if not req.message.strip() and not req.images:
            raise ValueError("The prompt is empty.")
        if (self.streaming or self.state.prompts) and req.streaming_behavior is None:
            raise ValueError(
                "The agent is already working. Send the message as steering or a follow-up "
                "(streamingBehavior 'steer' or 'followUp'), or wait for the run to end."
            )

    @workflow.update
    async def bash(self, req: BashRequest) -> BashResult:
        try:
            queue = await self._sandbox_queue()
        except ActivityError as err:
            raise ApplicationError(
                f"Could not start the docker sandbox: {_cause(err)}", non_retryable=True
            ) from err
        self.user_bash = asyncio.ensure_future(
            workflow.execute_activity(
                act.RUN_USER_BASH,
                UserBashInput(file=self._file(), command=req.command),
                result_type=BashResult,
                task_queue=queue,
                schedule_to_start_timeout=self._sandbox_pickup() if queue else None,
                start_to_close_timeout=timedelta(hours=12),
                heartbeat_timeout=TOOL_HEARTBEAT,
                retry_policy=RetryPolicy(maximum_attempts=1),
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
        )
        try:
            result: BashResult = await self.user_bash
        except (ActivityError, CancelledError, asyncio.CancelledError) as err:
            result = BashResult(
                output=f"The command did not finish: {_cause(err)}", exit_code=None, cancelled=True
            )
        finally:
            self.user_bash = None
        message: dict[str, Any] = {
            "role": "bashExecution",
            "command": req.command,
            "output": result.output,
            "exitCode": result.exit_code,
            "cancelled": result.cancelled,
            "truncated": result.truncated,
            "timestamp": self._now_ms(),
        }
        if result.full_output_path:
            message["fullOutputPath"] = result.full_output_path
        if req.exclude_from_context:
            message["excludeFromContext"] = True
        body = {"type": "message", "message": message}
        if self.streaming:
            self.deferred_entries.append(body)
        else:
            self._record_entry(body)
            self.state.message_count += 1
        return result

    @workflow.update
    async def compact(self, req: CompactRequest) -> CompactResult:
        if self.streaming:
            self.abort()
            await workflow.wait_condition(lambda: not self.streaming)
        await workflow.wait_condition(lambda: not self.compacting)
        result = await self._compact_with_events("manual", req.custom_instructions)
        if isinstance(result, str):
            raise ApplicationError(result, non_retryable=True)
        return result

    @workflow.update
    async def navigate(self, req: NavigateRequest) -> NavigateResult:
        """Continue from another point of the tree, optionally summarizing the branch left."""
        if self.streaming:
            raise ApplicationError("The agent is working; abort the run before moving in the session tree.")
        async with self.store_lock:
            await self._flush_locked()
            old_leaf = self.state.leaf_id
            if not req.summarize:
                self.state.leaf_id = req.new_leaf_id
                return NavigateResult(leaf_id=req.new_leaf_id)
            result: BranchSummaryResult = await workflow.execute_activity(
                act.SUMMARIZE_BRANCH,
                BranchSummaryInput(
                    file=self._file(),
                    old_leaf_id=old_leaf,
                    target_id=req.target_id,
                    new_leaf_id=req.new_leaf_id,
                    model=self.state.model,
                    thinking_level=self.state.thinking_level,
                    entry_id=self._new_id(),
                    entry_timestamp=iso_timestamp(self._now_ms()),
                    custom_instructions=req.custom_instructions,
                ),
                result_type=BranchSummaryResult,
                start_to_close_timeout=LLM_TIMEOUT,
                heartbeat_timeout=LLM_HEARTBEAT,
                retry_policy=INFRA_RETRY,
            )
            if result.error:
                raise ApplicationError(result.error, non_retryable=True)
            self.state.leaf_id = result.entry_id or req.new_leaf_id
            return NavigateResult(
                leaf_id=self.state.leaf_id, branch_summary_id=result.entry_id, summary=result.summary
            )

    @workflow.signal
    def set_auto_compaction(self, enabled: bool) -> None:
        self.config.compaction.enabled = enabled

    @workflow.signal
    def abort_bash(self) -> None:
        if self.user_bash is not None:
            self.user_bash.cancel()

    @workflow.signal
    def steer(self, text: str) -> None:
        self._queue_or_start(text, self.state.steering)

    @workflow.signal
    def follow_up(self, text: str) -> None:
        self._queue_or_start(text, self.state.follow_up)

    def _queue_or_start(self, text: str, queue: list[UserMessage]) -> None:
        message = self._user_message(PromptRequest(message=text))
        if self.streaming:
            queue.append(message)
            self._emit_queue()
        else:
            # Nothing is running: a steer or follow-up from another terminal starts a run.
            self.state.prompts.append(message)

    @workflow.signal
    def abort(self) -> None:
        if not self.streaming:
            return
        self.abort_requested = True
        for task in list(self.in_flight):
            task.cancel()
        # Children end their runs themselves, so their files and answers stay whole.
        for child in list(self.children.values()):
            signal = asyncio.ensure_future(child.signal("abort"))
            self.background.add(signal)
            signal.add_done_callback(self.background.discard)

    @workflow.signal
    def shutdown(self) -> None:
        self.shutdown_requested = True
        self.abort()

    @workflow.signal
    def set_model(self, model: ModelSpec) -> None:
        if model.provider == self.state.model.provider and model.id == self.state.model.id:
            self.state.model = model
            return
        self.state.model = model
        self._record_entry({"type": "model_change", "provider": model.provider, "modelId": model.id})

    @workflow.signal
    def set_thinking_level(self, level: ThinkingLevel) -> None:
        if level == self.state.thinking_level:
            return
        self.state.thinking_level = level
        self._record_entry({"type": "thinking_level_change", "thinkingLevel": level})

    @workflow.signal
    def set_auto_retry(self, enabled: bool) -> None:
        self.config.retry.enabled = enabled

    @workflow.signal
    def set_steering_mode(self, mode: QueueMode) -> None:
        self.state.steering_mode = mode

    @workflow.signal
    def set_follow_up_mode(self, mode: QueueMode) -> None:
        self.state.follow_up_mode = mode

    @workflow.signal
    def set_session_name(self, name: str) -> None:
        self.state.session_name = name
        self._record_entry({"type": "session_info", "name": name})
        self._emit({"type": "session_info_changed", "name": name})

    @workflow.query
    def read_events(self, from_offset: int) -> EventsPage:
        base = self.state.event_offset
        start = min(max(from_offset - base, 0), len(self.events))
        end, budget = start, PAGE_BYTES
        # Stay well inside gRPC's 4 MB message limit; always make progress by one event.
        while end < len(self.events) and (end == start or budget > 0):
            budget -= _approx_size(self.events[end])
            if budget < 0 and end > start:
                break
            end += 1
        return EventsPage(
            base_offset=base,
            next_offset=base + end,
            events=self.events[start:end],
            is_streaming=self.streaming or bool(self.state.prompts),
        )

    @workflow.query
    def get_state(self) -> SessionStateView:
        return SessionStateView(
            session_id=self.config.session_id,
            session_file=self.config.session_path,
            cwd=self.config.cwd,
            model=self.state.model,
            thinking_level=self.state.thinking_level,
            is_streaming=self.streaming,
            is_compacting=self.compacting,
            auto_compaction_enabled=self._auto_compaction(),
            steering_mode=self.state.steering_mode,
            follow_up_mode=self.state.follow_up_mode,
            session_name=self.state.session_name,
            message_count=self.state.message_count,
            pending_message_count=len(self.state.steering) + len(self.state.follow_up),
            stats=self.state.stats,
            last_assistant_text=self.state.last_assistant_text,
            runs=self.state.runs,
            leaf_id=self.state.leaf_id,
            auto_retry_enabled=self.config.retry.enabled,
        )


def _approx_size(event: dict[str, Any]) -> int:
    return len(json.dumps(event, separators=(",", ":"), default=str))


def _tool_output(msg: ToolResultMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [b.to_json_dict() for b in msg.content]}
    if msg.details is not None and msg.details != {}:
        out["details"] = msg.details
    return out


def _is_disk_full(err: BaseException) -> bool:
    cause = err.__cause__
    return isinstance(cause, ApplicationError) and cause.type == "DiskFull"


def _never_started(err: BaseException) -> bool:
    cause = err.__cause__
    return isinstance(cause, TemporalTimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START


def _cause(err: BaseException) -> str:
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err) or type(err).__name__


@workflow.defn(name="SubagentWorkflow")
class SubagentWorkflow(AgentSessionWorkflow):
    """A child session that works on one task and returns its final answer."""

    @workflow.init
    def __init__(self, inp: SubagentInput) -> None:
        super().__init__(inp.session)
        self.task = inp.task

    def _next_run_input(self, carried: CarriedState) -> Any:
        return SubagentInput(session=SessionInput(config=self.config, carried=carried), task=self.task)

    @workflow.run
    async def run(self, inp: SubagentInput) -> SubagentResult:  # type: ignore[override]
        handed_off = self.state.handoff is not None
        await self._run_agent([] if handed_off else [self._user_message(PromptRequest(message=inp.task))])
        await self._flush()
        patch = await self._finish_sandbox(want_patch=True)
        last = self.last_message
        return SubagentResult(
            text=last.text() if last else "",
            stop_reason=last.stop_reason if last else "error",
            error_message=last.error_message if last else "the subagent produced no answer",
            usage=self.state.stats.usage,
            session_file=self.config.session_path,
            patch=patch,
        )
