"""One session, as every front end drives it: typed calls of the workflow's handlers."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.workflow import UpdateMethodMultiParam

from tempi.agent.messages import ImageContent
from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.agent.thinking_levels import DEFAULT_THINKING_LEVEL, clamp_level, level_after_switch, next_level
from tempi.client.choices import ChoiceMemory, level_worth_remembering
from tempi.client.errors import SessionNotFound, SessionRefused
from tempi.client.events import EventFollower, SessionHandle
from tempi.client.transcript import context_messages, load_at_leaf
from tempi.store.session_store import SessionStore
from tempi.workflows.activity_payloads import (
    BashRequest,
    BashResult,
    CompactRequest,
    CompactResult,
    DequeueRequest,
    NavigateRequest,
    NavigateResult,
    QueuedMessages,
)
from tempi.workflows.session_types import (
    EventsPage,
    PromptRequest,
    QueueMode,
    SessionConfig,
    SessionInput,
    SessionStateView,
    workflow_id_for,
)
from tempi.workflows.session_workflow import AgentSessionWorkflow

T = TypeVar("T")
U = TypeVar("U")
StreamingBehavior = Literal["steer", "followUp"]
ABORT_WAIT_S = 30.0


async def _refusable(call: Awaitable[T]) -> T:
    """An update's result; the workflow's own reason when it rejected the update."""
    try:
        return await call
    except WorkflowUpdateFailedError as err:
        raise SessionRefused(str(err.cause or err)) from err


class SessionClient:
    """A session by its workflow id, not a run, so it follows continue-as-new.

    `config` is what this process started or resumed the session with (None for a
    session found by reference); the workflow's current view is `state()`."""

    def __init__(
        self,
        client: Client,
        session_id: str,
        *,
        store: SessionStore | None = None,
        session_path: str | None = None,
        config: SessionConfig | None = None,
        remember: ChoiceMemory | None = None,
        workflow_id: str | None = None,
    ) -> None:
        """`workflow_id`: a session run by another workflow type than its own (a pipeline's
        shard); by default the session's own workflow."""
        self.client = client
        self.session_id = session_id
        # Told of the user's model and thinking switches, so the next session starts with them.
        self.remember = remember
        self.store = store
        self.session_path = session_path or (config.session_path if config else None)
        self.config = config
        self.handle: SessionHandle = client.get_workflow_handle_for(
            AgentSessionWorkflow.run, workflow_id or workflow_id_for(session_id)
        )
        self._followers: weakref.WeakSet[EventFollower] = weakref.WeakSet()

    # --- sending -----------------------------------------------------------------------

    async def _signal(self, signal: Callable[..., None], *args: Any) -> None:
        """Send `signal`; this client's followers ask for what it did at their next poll."""
        try:
            await self.handle.signal(signal, *args)
        finally:
            self._wake_followers()

    async def _update(self, update: UpdateMethodMultiParam[[AgentSessionWorkflow, U], T], request: U) -> T:
        """Run `update`; this client's followers ask for what it did at their next poll."""
        try:
            return await self.handle.execute_update(update, request)
        finally:
            self._wake_followers()

    def _wake_followers(self) -> None:
        for follower in list(self._followers):
            follower.wake()

    # --- prompting ---------------------------------------------------------------------

    async def prompt(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] = (),
        streaming_behavior: StreamingBehavior | None = None,
        before: Sequence[str] = (),
    ) -> None:
        """Start a run, or with a behaviour queue the message if one is going. Returns once
        the session accepted it, before any event of the run. `before`: user messages that
        join the context ahead of `text`, each its own, with no model call of their own
        (only when the prompt starts a run)."""
        request = PromptRequest(
            message=text, images=list(images), streaming_behavior=streaming_behavior, before=list(before)
        )
        await _refusable(self._update(AgentSessionWorkflow.prompt, request))

    async def steer(self, text: str, *, images: Sequence[ImageContent] = ()) -> None:
        if images:  # only the prompt update carries images
            await self.prompt(text, images=images, streaming_behavior="steer")
        else:
            await self._signal(AgentSessionWorkflow.steer, text)

    async def follow_up(self, text: str, *, images: Sequence[ImageContent] = ()) -> None:
        if images:
            await self.prompt(text, images=images, streaming_behavior="followUp")
        else:
            await self._signal(AgentSessionWorkflow.follow_up, text)

    async def abort(self, *, wait: bool = False, timeout: float = ABORT_WAIT_S) -> None:
        """Stop the current run; with `wait`, return once it has stopped (or after `timeout`)."""
        await self._signal(AgentSessionWorkflow.abort)
        if not wait:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (await self.state()).is_streaming and loop.time() < deadline:
            await asyncio.sleep(0.1)

    async def dequeue(self, *, abort: bool = False) -> QueuedMessages:
        """Take back the queued steering and follow-ups, as pi's Alt+Up; with `abort`, stop
        the run too, as pi's Esc, which puts them back in the editor instead of letting
        them fire after the next prompt."""
        request = DequeueRequest(abort=abort)
        try:
            return await _refusable(self._update(AgentSessionWorkflow.dequeue, request))
        except SessionRefused:
            if not abort:
                raise
            # A worker still on code without `dequeue` refuses it: the run must stop anyway.
            await self._signal(AgentSessionWorkflow.abort)
            return QueuedMessages()

    async def bash(self, command: str, *, exclude_from_context: bool = False) -> BashResult:
        request = BashRequest(command=command, exclude_from_context=exclude_from_context)
        return await _refusable(self._update(AgentSessionWorkflow.bash, request))

    async def abort_bash(self) -> None:
        await self._signal(AgentSessionWorkflow.abort_bash)

    async def compact(self, custom_instructions: str | None = None) -> CompactResult:
        request = CompactRequest(custom_instructions=custom_instructions)
        return await _refusable(self._update(AgentSessionWorkflow.compact, request))

    async def navigate(
        self,
        target_id: str,
        new_leaf_id: str | None,
        *,
        summarize: bool = False,
        custom_instructions: str | None = None,
    ) -> NavigateResult:
        """Continue from another entry of the tree: `new_leaf_id` is the target, or its parent
        (None at the root) when a user message is to be re-edited."""
        request = NavigateRequest(
            target_id=target_id,
            new_leaf_id=new_leaf_id,
            summarize=summarize,
            custom_instructions=custom_instructions,
        )
        return await _refusable(self._update(AgentSessionWorkflow.navigate, request))

    # --- model and thinking --------------------------------------------------------------

    async def set_model(
        self,
        model: ModelSpec,
        *,
        default_level: ThinkingLevel = DEFAULT_THINKING_LEVEL,
        remember: bool = True,
    ) -> ThinkingLevel:
        """Switch models; the thinking level follows pi's rule for a switch (`default_level`
        is the settings' default thinking level). Returns the level now in effect.
        `remember=False`: a switch the user did not make here (a --model flag on resume)."""
        state = await self.state()
        await self._signal(AgentSessionWorkflow.set_model, model)
        level = level_after_switch(state.model, state.thinking_level, model, default_level)
        if level != state.thinking_level:
            await self._signal(AgentSessionWorkflow.set_thinking_level, level)
        if remember and self.remember is not None:
            self.remember(model=model)
            if level_worth_remembering(model, state.thinking_level, level):
                self.remember(level=level)
        return level

    async def cycle_model(
        self, models: Sequence[ModelSpec], *, default_level: ThinkingLevel = DEFAULT_THINKING_LEVEL
    ) -> tuple[ModelSpec, ThinkingLevel] | None:
        """The model after the current one in `models`; None when there is no other."""
        if len(models) <= 1:
            return None
        current = (await self.state()).model
        index = next(
            (i for i, m in enumerate(models) if (m.provider, m.id) == (current.provider, current.id)), -1
        )
        chosen = models[(index + 1) % len(models)]
        return chosen, await self.set_model(chosen, default_level=default_level)

    async def set_thinking_level(self, level: ThinkingLevel) -> ThinkingLevel:
        """Set the level the model accepts nearest to `level`; returns it."""
        state = await self.state()
        chosen = clamp_level(state.model, level)
        await self._signal(AgentSessionWorkflow.set_thinking_level, chosen)
        if self.remember is not None and level_worth_remembering(state.model, state.thinking_level, chosen):
            self.remember(level=chosen)
        return chosen

    async def cycle_thinking_level(self) -> ThinkingLevel | None:
        """The next level the model accepts; None when the model cannot think."""
        state = await self.state()
        level = next_level(state.model, state.thinking_level)
        if level is not None:
            await self._signal(AgentSessionWorkflow.set_thinking_level, level)
            if self.remember is not None and level_worth_remembering(
                state.model, state.thinking_level, level
            ):
                self.remember(level=level)
        return level

    # --- settings ----------------------------------------------------------------------

    async def rename(self, name: str) -> None:
        await self._signal(AgentSessionWorkflow.set_session_name, name)

    async def set_system_prompt(self, text: str) -> None:
        """The prompt of the session's next model calls (not written to the session file)."""
        await self._signal(AgentSessionWorkflow.set_system_prompt, text)

    async def set_auto_compaction(self, enabled: bool) -> None:
        await self._signal(AgentSessionWorkflow.set_auto_compaction, enabled)

    async def set_auto_retry(self, enabled: bool) -> None:
        await self._signal(AgentSessionWorkflow.set_auto_retry, enabled)

    async def set_steering_mode(self, mode: QueueMode) -> None:
        await self._signal(AgentSessionWorkflow.set_steering_mode, mode)

    async def set_follow_up_mode(self, mode: QueueMode) -> None:
        await self._signal(AgentSessionWorkflow.set_follow_up_mode, mode)

    async def shutdown(self) -> None:
        """End the workflow (its sandbox goes with it); the file stays and can be continued."""
        await self._signal(AgentSessionWorkflow.shutdown)

    # --- reading -----------------------------------------------------------------------

    async def state(self) -> SessionStateView:
        return await self.handle.query(AgentSessionWorkflow.get_state)

    async def running_config(self) -> SessionConfig:
        """The config the workflow's current run started with (the input of its first
        history event): what its tools and sandbox really are, whatever this process asked."""
        async for event in self.handle.fetch_history_events(page_size=1):
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            [started] = await self.client.data_converter.decode(payloads, [SessionInput])
            assert isinstance(started, SessionInput)
            return started.config
        raise SessionNotFound(f"Session {self.session_id} has no history to read its configuration from.")

    async def is_running(self) -> bool:
        try:
            desc = await self.handle.describe()
        except RPCError:
            return False
        return desc.status == WorkflowExecutionStatus.RUNNING

    async def messages(self) -> list[dict[str, Any]]:
        """pi's get_messages: the messages in context at the workflow's leaf, read from the
        session file (the workflow does not carry the conversation)."""
        if self.store is None:
            raise ValueError("messages() needs the session store the session's file is in")
        state = await self.state()
        loaded, leaf = await load_at_leaf(self.store, state.session_file, state.leaf_id)
        return context_messages(loaded, leaf)

    async def read_events(self, offset: int = 0, *, run_id: str | None = None) -> EventsPage:
        """One page of the raw event log from `offset` (offsets are global to the session);
        with `run_id`, as that run of the workflow holds it."""
        handle = self.handle
        if run_id is not None:
            handle = self.client.get_workflow_handle_for(AgentSessionWorkflow.run, handle.id, run_id=run_id)
        return await handle.query(AgentSessionWorkflow.read_events, offset)

    async def log_end(self) -> int:
        """Where the event log ends now: a page asked for far past it says so."""
        return (await self.read_events(1 << 62)).next_offset

    async def current_run_start(self) -> tuple[int, int] | None:
        """Where the latest run begins: the offset of the last `agent_start` in the event log,
        and its first message's timestamp (for telling that run's messages in the file from
        earlier ones). None when the log holds no run."""
        offset, found, first_ms = 0, None, None
        while True:
            page = await self.read_events(offset)
            if not page.events:
                break
            base = page.next_offset - len(page.events)
            for i, event in enumerate(page.events):
                if event.get("type") == "agent_start":
                    found, first_ms = base + i, None
                elif found is not None and first_ms is None and event.get("type") == "message_start":
                    first_ms = int((event.get("message") or {}).get("timestamp") or 0)
            offset = page.next_offset
        if found is None:
            return None
        return found, first_ms if first_ms is not None else 1 << 62

    def follow(
        self, *, from_offset: int = 0, live: bool = True, subagents: bool = True, shared: bool = False
    ) -> EventFollower:
        """A follower of pi-format events from `from_offset`, for front ends that poll it;
        `live` merges token deltas and tool output, `subagents` the events of `task` runs;
        `shared` reads the log through the file this machine's watchers share (for
        watchers, not for a session's driver: see EventFollower)."""
        follower = EventFollower(
            self.handle,
            self.session_path,
            self.session_id,
            from_offset=from_offset,
            live=live,
            client=self.client if subagents else None,
            shared=shared,
            history_client=self.client,
        )
        self._followers.add(follower)
        return follower

    async def events(
        self, from_offset: int = 0, *, until_idle: bool = False, live: bool = True
    ) -> AsyncIterator[dict[str, Any]]:
        """pi-format events from `from_offset`; with `until_idle`, ending once a run is over
        and nothing else is queued. Follows the session across continue-as-new."""
        if self.session_path is None:
            self.session_path = (await self.state()).session_file
        async for event in self.follow(from_offset=from_offset, live=live).events(until_idle=until_idle):
            yield event
