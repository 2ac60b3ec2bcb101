"""AgentSessionWorkflow: one durable coding session, turn by turn, with pi's loop semantics.

The workflow decides; activities act. It keeps only what it decides with (leaf id, queues,
settings, counters) and an in-memory event log served by a query. The conversation lives
in the session store: the LLM activity rebuilds context from it, tool activities park
their results there, and every entry crosses history once.

The class wires the parts in `tempi.workflows.session` together and answers the
handlers; the agent loop itself runs behind a port (`session/agent_port.py`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import TextContent, UserMessage
    from tempi.agent.model_spec import ModelSpec, ThinkingLevel
    from tempi.agent.session_entries import iso_timestamp
    from tempi.workflows import activity_names as act
    from tempi.workflows.activity_payloads import (
        BashRequest,
        BashResult,
        BranchSummaryInput,
        BranchSummaryResult,
        CompactRequest,
        CompactResult,
        DequeueRequest,
        NavigateRequest,
        NavigateResult,
        QueuedMessages,
    )
    from tempi.workflows.session.activity_options import Activities
    from tempi.workflows.session.agent_loop import AgentLoop
    from tempi.workflows.session.builtin_route import BuiltinToolRoute
    from tempi.workflows.session.compactor import Compactor
    from tempi.workflows.session.entries import EntryWriter, now_ms
    from tempi.workflows.session.event_log import EventLog
    from tempi.workflows.session.extension_route import ExtensionToolRoute, ExtensionTools
    from tempi.workflows.session.llm_call import LlmCaller
    from tempi.workflows.session.mcp_route import McpToolRoute, McpTools
    from tempi.workflows.session.queues import MessageQueues
    from tempi.workflows.session.run_control import RunControl
    from tempi.workflows.session.sandbox_lease import SandboxLease
    from tempi.workflows.session.subagent_runner import SubagentRunner, TaskToolRoute
    from tempi.workflows.session.tool_routes import ToolRoutes
    from tempi.workflows.session.user_bash import UserBash
    from tempi.workflows.session.workflow_port import WorkflowPort, continue_as_new_due
    from tempi.workflows.session_types import (
        CarriedState,
        EventsPage,
        PromptRequest,
        QueueMode,
        RunHandoff,
        SessionConfig,
        SessionInput,
        SessionStateView,
    )
    from tempi.workflows.watcher_view import WatcherView
    from tempi.workflows.watcher_view import publish as publish_watched_log

IDLE_TIMEOUT = timedelta(days=7)  # when the config names no idle time
UPGRADE_AT_CONTINUE_AS_NEW = "upgrade-at-continue-as-new"


def _next_run_build() -> dict[str, Any]:
    """A versioned worker pins each run to its build; the next run starts on the deployment's
    current build, so a session picks up new workflow code at its next continue-as-new.
    Unversioned workers ignore it."""
    if not workflow.patched(UPGRADE_AT_CONTINUE_AS_NEW):
        return {}
    return {"initial_versioning_behavior": workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE}


def idle_close_after(config: SessionConfig) -> timedelta | None:
    """How long the session waits for a prompt before it closes (None: for ever). Every
    session used to wait a week, holding its sandbox container and its build pin."""
    if config.idle_close_s is None:
        return IDLE_TIMEOUT
    return timedelta(seconds=config.idle_close_s) if config.idle_close_s > 0 else None


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
        self.activities = activities = Activities(cfg.sandbox_pickup_s)
        self.control = RunControl()
        self.log = EventLog(self.state)
        self.entries = EntryWriter(cfg, self.state, activities)
        self.queues = MessageQueues(self.state, self.log)
        # The run's last writes are under way: watchers that wait for the session to be idle
        # (`tempi -p`) return once the file holds the whole run, and its live files are gone.
        self.closing_run = False
        self.sandbox = SandboxLease(cfg, self.state, self.entries.file_ref, activities)
        self.subagents = SubagentRunner(cfg, self.state, self.log, self.control)
        extensions = ExtensionTools(cfg, self.state, self.log, self.entries, activities, self.queues)
        self.compactor = Compactor(
            cfg, self.state, self.log, self.entries, self.control, activities, extensions
        )
        self.user_bash = UserBash(self.state, self.entries, self.sandbox, self.control, activities)
        # Tools from extensions or MCP servers register their routes here.
        routes = ToolRoutes(
            BuiltinToolRoute(cfg, self.control, self.entries, self.sandbox, activities, extensions)
        )
        routes.register(TaskToolRoute(self.subagents))
        mcp = McpTools(cfg, self.state, activities)
        routes.register(McpToolRoute(mcp, self.control, self.entries, activities, extensions), own_tools=True)
        routes.register(
            ExtensionToolRoute(extensions, self.control, self.entries, activities, self.sandbox),
            own_tools=True,
        )
        port = WorkflowPort(
            config=cfg,
            state=self.state,
            log=self.log,
            entries=self.entries,
            queues=self.queues,
            control=self.control,
            llm=LlmCaller(
                cfg,
                self.state,
                self.log,
                self.entries,
                self.control,
                self.subagents,
                activities,
                mcp,
                extensions,
            ),
            routes=routes,
            compactor=self.compactor,
            user_bash=self.user_bash,
            continue_as_new=self._continue_as_new,
            extensions=extensions,
        )
        self.loop = AgentLoop(port, cfg, self.state)
        if inp.carried is None and not cfg.existing_file:
            self.entries.record(
                {"type": "model_change", "provider": cfg.model.provider, "modelId": cfg.model.id}
            )
            self.entries.record({"type": "thinking_level_change", "thinkingLevel": cfg.thinking_level})
        publish_watched_log(self)

    @workflow.run
    async def run(self, inp: SessionInput) -> str:
        if self.state.handoff is not None:
            await self.loop.run([])
            await self._end_prompt()
        while True:
            ready = await self._wait_for_work()
            if not ready or self.control.shutdown_requested:
                await self.entries.flush()
                await self.sandbox.finish(want_patch=False)
                return "idle" if not ready else "shutdown"
            if not self.queues.has_prompts():
                await self.entries.flush()  # settings changed or a user command ran while idle
                continue
            prompt = self.queues.next_prompt()
            self.control.abort_requested = False
            await self.loop.run([prompt])
            await self._end_prompt()

    async def _end_prompt(self) -> None:
        self.closing_run = True
        try:
            await self.entries.flush()
        finally:
            self.closing_run = False
        if continue_as_new_due(self.config) and not self.entries.outbox:
            await workflow.wait_condition(workflow.all_handlers_finished)
            self._continue_as_new(None)

    def _continue_as_new(self, handoff: RunHandoff | None) -> NoReturn:
        # The old run answers queries after it closes (by replay), so its own state
        # must not change here: the next run gets an updated copy.
        event_offset, tail = self.log.carried()
        carried = self.state.model_copy(
            update={"event_offset": event_offset, "recent_events": tail, "handoff": handoff}
        )
        self.control.handed_off = handoff is not None
        workflow.continue_as_new(self._next_run_input(carried), **_next_run_build())

    def _next_run_input(self, carried: CarriedState) -> Any:
        return SessionInput(config=self.config, carried=carried)

    async def _wait_for_work(self) -> bool:
        try:
            await workflow.wait_condition(
                lambda: (
                    self.queues.has_prompts()
                    or self.control.shutdown_requested
                    or self.entries.idle_writes_waiting(self.control.streaming)
                ),
                timeout=idle_close_after(self.config),
            )
        except TimeoutError:
            return False
        return True

    def _user_message(self, req: PromptRequest) -> UserMessage:
        content: list[Any] = [TextContent(text=req.message), *req.images]
        return UserMessage(content=content, timestamp=now_ms())

    # --- messages from clients ---------------------------------------------------------

    @workflow.update
    async def prompt(self, req: PromptRequest) -> None:
        # Earlier messages go straight into the tree, as mom appends its log lines to the
        # session before prompting: the run's first model call sees them, and no event
        # announces them.
        for text in req.before:
            self.entries.record_message(
                UserMessage(content=[TextContent(text=text)], timestamp=now_ms()).to_json_dict()
            )
            self.state.message_count += 1
        self.queues.submit(self._user_message(req), req.streaming_behavior, streaming=self.control.streaming)

    @prompt.validator
    def _validate_prompt(self, req: PromptRequest) -> None:
        if not req.message.strip() and not req.images:
            raise ValueError("The prompt is empty.")
        if (self.control.streaming or self.queues.has_prompts()) and req.streaming_behavior is None:
            raise ValueError(
                "The agent is already working. Send the message as steering or a follow-up "
                "(streamingBehavior 'steer' or 'followUp'), or wait for the run to end."
            )
        if req.before and (self.control.streaming or self.queues.has_prompts()):
            raise ValueError(
                "Earlier messages go only with a prompt that starts a run, and the agent is "
                "working. Send them in the message itself, or wait for the run to end."
            )

    @workflow.update
    async def bash(self, req: BashRequest) -> BashResult:
        return await self.user_bash.run(req)

    @workflow.update
    async def compact(self, req: CompactRequest) -> CompactResult:
        if self.control.streaming:
            self.abort()
            await workflow.wait_condition(lambda: not self.control.streaming)
        await workflow.wait_condition(lambda: not self.compactor.compacting)
        result = await self.compactor.compact_with_events("manual", req.custom_instructions)
        if isinstance(result, str):
            raise ApplicationError(result, non_retryable=True)
        return result

    @workflow.update
    async def navigate(self, req: NavigateRequest) -> NavigateResult:
        """Continue from another point of the tree, optionally summarizing the branch left."""
        if self.control.streaming:
            raise ApplicationError("The agent is working; abort the run before moving in the session tree.")
        async with self.entries.store_lock:
            await self.entries.flush_locked()
            old_leaf = self.state.leaf_id
            if not req.summarize:
                self.state.leaf_id = req.new_leaf_id
                return NavigateResult(leaf_id=req.new_leaf_id)
            with self.entries.writing_below_leaf():
                result: BranchSummaryResult = await self.activities.execute(
                    act.SUMMARIZE_BRANCH,
                    BranchSummaryInput(
                        file=self.entries.file(),
                        old_leaf_id=old_leaf,
                        target_id=req.target_id,
                        new_leaf_id=req.new_leaf_id,
                        model=self.state.model,
                        thinking_level=self.state.thinking_level,
                        entry_id=self.entries.new_id(),
                        entry_timestamp=iso_timestamp(now_ms()),
                        custom_instructions=req.custom_instructions,
                    ),
                    BranchSummaryResult,
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
        self.user_bash.abort()

    @workflow.signal
    def steer(self, text: str) -> None:
        message = self._user_message(PromptRequest(message=text))
        self.queues.add_or_start(message, "steering", streaming=self.control.streaming)

    @workflow.signal
    def follow_up(self, text: str) -> None:
        message = self._user_message(PromptRequest(message=text))
        self.queues.add_or_start(message, "follow_up", streaming=self.control.streaming)

    @workflow.signal
    def abort(self) -> None:
        if not self.control.streaming:
            return
        self.control.abort_requested = True
        self.control.cancel_in_flight()
        self.subagents.abort_children()

    @workflow.update
    def dequeue(self, req: DequeueRequest) -> QueuedMessages:
        # One update, so a message queued between taking the queue back and the abort
        # cannot slip into the aborted run, and the client gets the texts for its editor.
        taken = self.queues.clear()
        if req.abort:
            self.abort()
        return taken

    @workflow.signal
    def shutdown(self) -> None:
        self.control.shutdown_requested = True
        self.abort()

    @workflow.signal
    def set_model(self, model: ModelSpec) -> None:
        if model.provider == self.state.model.provider and model.id == self.state.model.id:
            self.state.model = model
            return
        self.state.model = model
        self.entries.record({"type": "model_change", "provider": model.provider, "modelId": model.id})

    @workflow.signal
    def set_thinking_level(self, level: ThinkingLevel) -> None:
        if level == self.state.thinking_level:
            return
        self.state.thinking_level = level
        self.entries.record({"type": "thinking_level_change", "thinkingLevel": level})

    @workflow.signal
    def set_system_prompt(self, text: str) -> None:
        # A front end that rebuilds the prompt per run (mom re-reads memory and skills) sets it
        # here; it rides on the config, so a continued-as-new run keeps it.
        self.config.system_prompt = text

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
        self.entries.record({"type": "session_info", "name": name})
        self.log.emit({"type": "session_info_changed", "name": name})

    @workflow.query
    def read_events(self, from_offset: int) -> EventsPage:
        return self.log.page(from_offset, is_streaming=self._busy_for_watchers())

    def _busy_for_watchers(self) -> bool:
        return self.control.streaming or self.queues.has_prompts() or self.closing_run

    # The log as its worker's doorbell reads it (watcher_view.py): not handlers, no history.
    def watcher_view(self) -> WatcherView:
        return self.log.next_offset(), self._busy_for_watchers(), self.state.leaf_id

    def watched_events(self, from_offset: int) -> tuple[int, list[dict[str, Any]]]:
        return self.log.since(from_offset)

    @workflow.query
    def get_state(self) -> SessionStateView:
        return SessionStateView(
            session_id=self.config.session_id,
            session_file=self.config.session_path,
            cwd=self.config.cwd,
            model=self.state.model,
            thinking_level=self.state.thinking_level,
            is_streaming=self.control.streaming,
            is_compacting=self.compactor.compacting,
            auto_compaction_enabled=self.config.compaction.enabled,
            steering_mode=self.state.steering_mode,
            follow_up_mode=self.state.follow_up_mode,
            session_name=self.state.session_name,
            message_count=self.state.message_count,
            pending_message_count=self.queues.pending_count(),
            stats=self.state.stats,
            last_assistant_text=self.state.last_assistant_text,
            runs=self.state.runs,
            leaf_id=self.state.leaf_id,
            auto_retry_enabled=self.config.retry.enabled,
        )
