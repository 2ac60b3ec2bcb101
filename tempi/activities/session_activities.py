"""The session workflow's activities: one LLM call, one tool call, one store flush.

Each is a thin shell over plain functions. All three are safe to retry: entries are keyed
by ids the workflow made, so a retried write is a no-op and a retried call that already
finished returns what it stored the first time.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from weakref import WeakKeyDictionary

from temporalio import activity
from temporalio.exceptions import ApplicationError

from tempi.activities.compaction import (
    CompactionAborted,
    CompactionCancelled,
    CompactionError,
    compact_session,
    summarize_branch_session,
)
from tempi.activities.file_turns import FileTurns, anchor_of, file_changed, outbox_ids
from tempi.activities.llm import StreamOptions, classify_error, retry_after_ms, stream_assistant
from tempi.activities.llm.answer_size import check_answer_size
from tempi.activities.llm.contract import SDK_RETRIES
from tempi.activities.llm.unicode_guard import holds_lone_surrogate
from tempi.activities.metrics import record_model_call, record_sandbox_failure
from tempi.activities.sandbox import WORKSPACE_DIR, SandboxUnavailableError
from tempi.activities.sandbox_policy import check_sandbox, refusal
from tempi.activities.spans import llm_span, record_usage, traced_tool_call
from tempi.activities.tools import ExecutionBackend, LocalBackend, ToolContext, execute_tool
from tempi.activities.tools.bash import run_command
from tempi.activities.tools.bwrap_backend import BwrapBackend
from tempi.activities.tools.names import escape_value
from tempi.agent.blocked_images import without_images
from tempi.agent.llm_context import LlmContext
from tempi.agent.llm_conversion import GrowingConversion
from tempi.agent.messages import AssistantMessage, ImageContent, TextContent, ToolCall, ToolResultMessage
from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.agent.partial_message import compact_delta
from tempi.agent.session_entries import MessageEntry
from tempi.agent.session_tree import SessionTree
from tempi.agent.tool_specs import ToolOutcome, labelled, tool_specs
from tempi.config.errors import ConfigError
from tempi.config.settings import Settings, settings_at_call
from tempi.extensions.compaction_hook import BeforeCompactHooks
from tempi.extensions.hooks import context_for, hooked, with_context_hooks
from tempi.extensions.models import ExtensionEffects, ExtensionProblem
from tempi.extensions.run_events import turn_hooks
from tempi.store.live_channel import LiveWriter, remove_live_files
from tempi.store.modes import create_private_file, make_private_dirs
from tempi.store.session_store import SessionStore
from tempi.store.sidecar import live_path, pending_path, sidecar_dir
from tempi.workflows import activity_names as names
from tempi.workflows.activity_payloads import (
    BashResult,
    BranchSummaryInput,
    BranchSummaryResult,
    CompactActivityResult,
    CompactInput,
    CompactResult,
    FlushInput,
    LlmCallInput,
    LlmCallResult,
    OutboxItem,
    SessionFileRef,
    ToolCallInput,
    ToolCallResult,
    UserBashInput,
)

# An abort reaches an activity only in the answer to a heartbeat, so the beat (and the
# worker's heartbeat throttle, HEARTBEAT_THROTTLE in workers/worker.py) sets how long a
# killed command keeps running: pi kills within a few hundredths of a second (`python -m
# bench abort`), tempi within a beat.
HEARTBEAT_EVERY_S = 0.1
DISK_FULL = "DiskFull"
CONFIGURATION_ERROR = "ConfigurationError"

WORKER_STOPPED_TEXT = "The worker stopped while the model was answering; the call is retried when one runs."
WORKER_STOPPED_TOOL_TEXT = (
    "The tempi server stopped while this tool ran, so it was stopped and may not have completed. "
    "Check the workspace state before running it again."
)


@contextlib.contextmanager
def out_of_space_is_final(path: str) -> Iterator[None]:
    """A full disk will not heal by retrying in a second: fail at once, with what to do."""
    try:
        yield
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
        raise ApplicationError(
            f"No space left on the device holding {path}, so the session could not be saved. "
            "Free some space and send the prompt again: the session keeps its place.",
            type=DISK_FULL,
            non_retryable=True,
        ) from err


ABORT_GRACE_S = 5.0

CredentialResolver = Callable[[ModelSpec], tuple[str | None, dict[str, str]]]
"""(api key, extra headers) for a model, resolved where the call runs."""


def _now_iso() -> str:
    ms = int(time.time() * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(ms / 1000)) + f"{ms % 1000:03d}Z"


async def make_backend(ref: SessionFileRef) -> tuple[ExecutionBackend, str]:
    """Where the session's tools act, and their working directory there: this machine, a
    bubblewrap sandbox over the cwd, the session's docker container, or the user's."""
    if ref.sandbox == "container":
        from tempi.activities.sandbox.user_container import open_user_container

        if ref.container_id is None or ref.container_name is None:
            raise SandboxUnavailableError("The session's container was not looked up")
        return await open_user_container(ref.container_id, ref.container_name, ref.cwd)
    if ref.sandbox == "docker":
        if ref.container_id is None:
            raise SandboxUnavailableError("The session's sandbox was not created")
        from tempi.activities.sandbox import open_backend

        return await open_backend(ref.container_id), WORKSPACE_DIR
    if ref.sandbox == "bwrap":
        return BwrapBackend(ref.cwd), ref.cwd
    return LocalBackend(), ref.cwd


def _sandbox_lost(
    call: ToolCall, timestamp_ms: int, err: SandboxUnavailableError, user_container: bool
) -> ToolCallResult:
    if user_container:
        text = f"Cannot run the tool: {err}"
    else:
        text = f"The sandbox is gone ({err}); a fresh one starts with the next tool call. Files changed in it may be lost."
    return ToolCallResult(message=error_result(call, timestamp_ms, text), sandbox_lost=True)


def error_result(call: ToolCall, timestamp_ms: int, text: str) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=[TextContent(text=text)],
        details={},
        is_error=True,
        timestamp=timestamp_ms,
    )


def ensure_session_file(store: SessionStore, ref: SessionFileRef) -> None:
    path = Path(ref.session_path)
    if path.exists():
        return
    header: dict[str, Any] = {
        "type": "session",
        "version": 3,
        "id": ref.session_id,
        "timestamp": ref.header_timestamp or _now_iso(),
        "cwd": ref.cwd,
    }
    if ref.parent_session:
        header["parentSession"] = ref.parent_session
    store.create(path, header)


def write_outbox(store: SessionStore, ref: SessionFileRef, outbox: list[OutboxItem]) -> None:
    """Append the outbox in order, pulling parked tool results; safe to repeat."""
    for blob in append_outbox(store, ref, outbox, durable=True):
        with contextlib.suppress(FileNotFoundError):
            blob.unlink()


def append_outbox(
    store: SessionStore, ref: SessionFileRef, outbox: list[OutboxItem], *, durable: bool
) -> list[Path]:
    """Append the outbox in order; returns the parked results it took in, whose files may
    go once the lines are durable."""
    if not outbox:
        return []
    ensure_session_file(store, ref)
    entries: list[dict[str, Any]] = []
    parked: list[Path] = []
    for item in outbox:
        if item.entry is not None:
            entries.append(item.entry)
            continue
        assert item.pending_id is not None
        blob = pending_path(ref.session_path, ref.session_id, item.pending_id)
        try:
            entries.append(json.loads(blob.read_text(encoding="utf-8")))
            parked.append(blob)
        except FileNotFoundError:
            if not store.has_entry(Path(ref.session_path), item.pending_id):
                raise RuntimeError(
                    f"tool result {item.pending_id} was neither parked nor written to {ref.session_path}"
                ) from None
    store.append(Path(ref.session_path), entries, durable=durable)
    return parked


def park_entry(ref: SessionFileRef, entry: dict[str, Any]) -> None:
    """Store a finished tool result until the workflow commits the turn's results in order."""
    blob = pending_path(ref.session_path, ref.session_id, entry["id"])
    make_private_dirs(blob.parent)
    tmp = blob.with_suffix(".tmp")
    with open(create_private_file(tmp, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as out:
        out.write(json.dumps(entry, ensure_ascii=False))
    os.replace(tmp, blob)


class ParkedCall(Protocol):
    """What a tool activity's input says about where its result entry goes."""

    @property
    def file(self) -> SessionFileRef: ...
    @property
    def entry_id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def entry_timestamp(self) -> str: ...


def park_result(
    inp: ParkedCall, message: ToolResultMessage, effects: ExtensionEffects | None
) -> ToolCallResult:
    """Park a tool's result entry beside the session file and return what history carries:
    a reference-sized message, and the extensions' effects when there are any."""
    message = encodable(message)
    park_entry(
        inp.file,
        {
            "type": "message",
            "id": inp.entry_id,
            "parentId": inp.parent_id,
            "timestamp": inp.entry_timestamp,
            "message": message.to_json_dict(),
        },
    )
    return ToolCallResult(
        message=for_history(message), effects=effects if effects and not effects.empty() else None
    )


def find_parked(ref: SessionFileRef, entry_id: str) -> dict[str, Any] | None:
    try:
        return json.loads(pending_path(ref.session_path, ref.session_id, entry_id).read_text("utf-8"))
    except FileNotFoundError:
        return None


# Per session tree (the store's, kept while the store keeps the session): its last call's
# messages in the model's terms, so a turn converts only its own.
_CONVERSIONS: WeakKeyDictionary[SessionTree, GrowingConversion] = WeakKeyDictionary()


def build_llm_context(store: SessionStore, inp: LlmCallInput, block_images: bool) -> LlmContext:
    session = store.load(Path(inp.file.session_path))
    context = session.tree.build_context(inp.leaf_id)
    messages = _CONVERSIONS.setdefault(session.tree, GrowingConversion()).convert(context.messages)
    specs = [*tool_specs(inp.tools), *inp.extra_tools]
    # Built from validated parts: validating again would walk every message of the session.
    return LlmContext.model_construct(
        system_prompt=inp.system_prompt,
        messages=without_images(messages) if block_images else messages,
        tools=labelled(specs) if inp.tool_labels else specs,
    )


class Heartbeater:
    """Heartbeats on a timer so a dead worker is noticed and cancellation is delivered."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Heartbeater:
        self._task = asyncio.create_task(self._beat())
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _beat(self) -> None:
        if activity.info().is_local:
            return  # the server knows nothing of a local activity; the workflow task is its lease
        # The first beat waits one period: the SDK sends a first beat at once, and most model
        # calls and tools end within it, so beating at the start costs the server a write per
        # call while cancellation arrives no sooner (the next beat is held to the period).
        while True:
            await asyncio.sleep(HEARTBEAT_EVERY_S)
            activity.heartbeat()


@dataclass
class RunningTool:
    """A tool call running on this worker: the task running it and how to stop it."""

    inp: ToolCallInput
    task: asyncio.Task[tuple[ToolOutcome, ExtensionEffects]]
    abort: asyncio.Event
    live: LiveWriter

    async def kill(self) -> None:
        self.abort.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.task, ABORT_GRACE_S)
        self.live.close()

    async def stop(self) -> ToolCallResult:
        """Kill the call (an abort, or this worker stopping) and park what that says."""
        await self.kill()
        text = WORKER_STOPPED_TOOL_TEXT if activity.is_worker_shutdown() else "Aborted by the user."
        return park_result(self.inp, error_result(self.inp.tool_call, self.inp.timestamp_ms, text), None)

    def conclude(self, outcome: ToolOutcome, effects: ExtensionEffects | None) -> ToolCallResult:
        self.live.close()
        call = self.inp.tool_call
        message = ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=outcome.content,
            details=outcome.details,
            is_error=outcome.is_error,
            timestamp=self.inp.timestamp_ms,
        )
        return park_result(self.inp, message, effects)


class SessionActivities:
    def __init__(self, store: SessionStore, credentials: CredentialResolver) -> None:
        self.store = store
        self.credentials = credentials

    async def _options(
        self, model: ModelSpec, thinking_level: ThinkingLevel, session_id: str, settings: Settings
    ) -> StreamOptions:
        """Provider options with the credentials resolved here, on the worker (in a thread: a
        `!command` may run, or an expired login wait for auth.json's lock and refresh)."""
        try:
            api_key, headers = await asyncio.to_thread(self.credentials, model)
        except ConfigError as err:
            # A broken models.json or a failing `!command` does not heal by retrying every
            # few seconds while the user waits: end the turn now and say what to fix.
            raise ApplicationError(
                f"{err}\nFix the configuration and send the prompt again: the session keeps its place.",
                type=CONFIGURATION_ERROR,
                non_retryable=True,
            ) from None
        return StreamOptions(
            api_key=api_key,
            headers=headers,
            thinking_level=thinking_level,
            session_id=session_id,
            sdk_retries=SDK_RETRIES if (retries := settings.retry.provider.max_retries) is None else retries,
        )

    @activity.defn(name=names.CALL_LLM)
    async def call_llm(self, inp: LlmCallInput) -> LlmCallResult:
        with out_of_space_is_final(inp.file.session_path), llm_span(inp.model.provider, inp.model.id) as span:
            started = time.monotonic()
            result = await self._call_llm(inp)
            record_model_call(inp.model.provider, inp.model.id, result.message, time.monotonic() - started)
            usage = result.message.usage
            record_usage(
                span,
                input_tokens=usage.input,
                output_tokens=usage.output,
                stop_reason=result.message.stop_reason,
            )
            return result

    async def _call_llm(self, inp: LlmCallInput) -> LlmCallResult:
        path = Path(inp.file.session_path)
        turns = FileTurns(
            inp.file, [*outbox_ids(inp.outbox), inp.entry_id], anchor_of(inp.outbox, inp.leaf_id)
        )
        answered = path.exists() and self.store.has_entry(path, inp.entry_id)
        outbox = inp.outbox
        if not answered:
            outbox, continues = turns.continue_from_file(inp.outbox)
            if not continues:
                raise file_changed(inp.file.session_path)
        # The outbox's lines become durable with the answer's (one fsync a turn, not two).
        taken = append_outbox(self.store, inp.file, outbox, durable=False)
        try:
            return await self._answer(inp, path, turns, answered)
        finally:
            self.store.sync(path)
            for blob in taken:
                with contextlib.suppress(FileNotFoundError):
                    blob.unlink()

    async def _answer(self, inp: LlmCallInput, path: Path, turns: FileTurns, answered: bool) -> LlmCallResult:
        turns.settle()
        if answered:
            # An earlier attempt finished and wrote its answer; do not ask the model twice.
            existing = self.store.load(path).tree.get(inp.entry_id)
            if isinstance(existing, MessageEntry) and isinstance(existing.message, AssistantMessage):
                return _llm_result(existing.message)

        if inp.tools or inp.extra_tools:
            # Refused before the model is paid for a turn whose tools could not run here.
            check_sandbox(inp.file.sandbox)
        settings = settings_at_call(Path(inp.file.cwd))
        context = build_llm_context(self.store, inp, settings.images.block_images)
        problems: list[ExtensionProblem] = []
        effects = ExtensionEffects()
        if inp.extensions:
            problems, effects = await turn_hooks(
                inp.extensions, context_for(inp.file), context, inp.turn_index
            )
            context = await with_context_hooks(inp.extensions, context_for(inp.file), context)
        options = await self._options(inp.model, inp.thinking_level, inp.file.session_id, settings)
        live = LiveWriter(
            live_path(inp.file.session_path, inp.file.session_id, inp.entry_id), activity.info().attempt
        )
        progress = _StreamProgress(inp.model)
        try:
            async with Heartbeater():
                final = await _stream_to_live(inp, context, options, progress, live)
        except asyncio.CancelledError:
            if activity.is_worker_shutdown():
                # Not the user's abort: the worker is stopping (`tempi server stop --force`).
                # Fail this attempt so the retry policy asks the model again once a worker runs.
                raise ApplicationError(WORKER_STOPPED_TEXT) from None
            # Cancelled by an abort: keep what was streamed so far, as pi does.
            final = progress.aborted()
        finally:
            live.close()
        message = final.to_json_dict()
        check_answer_size(len(json.dumps(message, ensure_ascii=False).encode("utf-8")))
        entry = {
            "type": "message",
            "id": inp.entry_id,
            "parentId": inp.leaf_id,
            "timestamp": inp.entry_timestamp,
            "message": message,
        }
        if turns.foreign():
            # The answer was asked for on a view of the file that is no longer the latest.
            raise file_changed(inp.file.session_path)
        self.store.append(path, [entry])
        turns.settle()
        return _llm_result(final).model_copy(
            update={"problems": problems, "effects": None if effects.empty() else effects}
        )

    @activity.defn(name=names.RUN_TOOL)
    async def run_tool(self, inp: ToolCallInput) -> ToolCallResult:
        with out_of_space_is_final(inp.file.session_path):
            return await traced_tool_call(inp.tool_call.name, self._run_tool(inp))

    async def _run_tool(self, inp: ToolCallInput) -> ToolCallResult:
        started = await self.start_tool(inp)
        if isinstance(started, ToolCallResult):
            return started
        return await self.finish_tool(started)

    async def start_tool(self, inp: ToolCallInput) -> ToolCallResult | RunningTool:
        """The call's result when it needs no run (parked by an earlier attempt, refused by
        the sandbox policy, its sandbox gone), else the call started on this worker."""
        parked = find_parked(inp.file, inp.entry_id)
        if parked is not None:
            return ToolCallResult(message=for_history(ToolResultMessage.model_validate(parked["message"])))
        call = inp.tool_call
        if (refused := refusal(inp.file.sandbox)) is not None:
            return ToolCallResult(message=error_result(call, inp.timestamp_ms, refused))
        try:
            backend, cwd = await make_backend(inp.file)
        except SandboxUnavailableError as err:
            record_sandbox_failure(inp.file.sandbox)
            return _sandbox_lost(call, inp.timestamp_ms, err, inp.file.sandbox == "container")
        live = LiveWriter(
            live_path(inp.file.session_path, inp.file.session_id, call.id), activity.info().attempt
        )
        abort = asyncio.Event()
        state_dir = sidecar_dir(inp.file.session_path, inp.file.session_id)
        ctx = ToolContext(
            cwd=cwd,
            backend=backend,
            tool_call_id=call.id,
            on_update=lambda partial: live.write({"partialResult": partial.to_json_dict()}),
            abort=abort,
            spill_dir=str(state_dir / "output"),
            state_dir=str(state_dir),
            command_prefix=settings_at_call(Path(inp.file.cwd)).shell_command_prefix
            if call.name == "bash"
            else None,
            host_cwd=inp.file.cwd if inp.file.sandbox in ("docker", "container") else None,
        )
        task = asyncio.create_task(
            hooked(
                inp.extensions, context_for(inp.file), call, lambda args: execute_tool(call.name, args, ctx)
            )
        )
        return RunningTool(inp, task, abort, live)

    async def finish_tool(self, running: RunningTool) -> ToolCallResult:
        """Wait for a started call under heartbeats (an abort arrives in their answer) and
        park its result."""
        try:
            async with Heartbeater():
                outcome, effects = await asyncio.shield(running.task)
        except asyncio.CancelledError:
            return await running.stop()
        except BaseException:
            running.live.close()
            raise
        return running.conclude(outcome, effects)

    @activity.defn(name=names.RUN_USER_BASH)
    async def run_user_bash(self, inp: UserBashInput) -> BashResult:
        check_sandbox(inp.file.sandbox)
        backend, cwd = await make_backend(inp.file)
        ctx = ToolContext(
            cwd=cwd,
            backend=backend,
            abort=asyncio.Event(),
            spill_dir=str(sidecar_dir(inp.file.session_path, inp.file.session_id) / "output"),
        )
        task = asyncio.create_task(run_command(inp.command, ctx))
        try:
            async with Heartbeater():
                run = await asyncio.shield(task)
        except asyncio.CancelledError:
            assert ctx.abort is not None
            ctx.abort.set()
            run = await asyncio.wait_for(task, ABORT_GRACE_S)
        details = run.details or {}
        return BashResult(
            output=run.text,
            exit_code=run.result.exit_code,
            cancelled=run.result.aborted,
            truncated=bool(details),
            full_output_path=details.get("fullOutputPath"),
        )

    @activity.defn(name=names.COMPACT)
    async def compact(self, inp: CompactInput) -> CompactActivityResult:
        turns = FileTurns(
            inp.file, [*outbox_ids(inp.outbox), inp.entry_id], anchor_of(inp.outbox, inp.leaf_id)
        )
        with out_of_space_is_final(inp.file.session_path):
            outbox, _ = turns.continue_from_file(inp.outbox)
            write_outbox(self.store, inp.file, outbox)
            turns.settle()
        try:
            options = await self._options(
                inp.model, inp.thinking_level, inp.file.session_id, settings_at_call(Path(inp.file.cwd))
            )
        except ApplicationError as err:
            return CompactActivityResult(error=f"Compaction failed: {err.message}")
        hooks = (
            BeforeCompactHooks(inp.extensions, context_for(inp.file), inp.reason, inp.custom_instructions)
            if inp.extensions
            else None
        )

        def hooks_problems() -> list[ExtensionProblem]:
            return hooks.problems if hooks is not None else []

        try:
            async with Heartbeater():
                outcome = await compact_session(
                    self.store,
                    Path(inp.file.session_path),
                    inp.leaf_id,
                    inp.model,
                    options,
                    inp.policy,
                    inp.custom_instructions,
                    inp.entry_id,
                    inp.entry_timestamp,
                    inp.reason,
                    before=hooks,
                )
        except CompactionCancelled:
            # pi reports an extension's cancel as an aborted compaction.
            return CompactActivityResult(
                aborted=True, error="An extension cancelled the compaction.", problems=hooks_problems()
            )
        except (CompactionAborted, asyncio.CancelledError):
            return CompactActivityResult(aborted=True, error="Compaction was aborted.")
        except CompactionError as err:
            return CompactActivityResult(error=f"Compaction failed: {err}", problems=hooks_problems())
        if outcome is None:
            return CompactActivityResult(error="Nothing to compact.")
        with out_of_space_is_final(inp.file.session_path):
            turns.settle()
        return CompactActivityResult(
            outcome=CompactResult.model_validate(outcome.to_json_dict()), problems=hooks_problems()
        )

    @activity.defn(name=names.SUMMARIZE_BRANCH)
    async def summarize_branch(self, inp: BranchSummaryInput) -> BranchSummaryResult:
        try:
            options = await self._options(
                inp.model, inp.thinking_level, inp.file.session_id, settings_at_call(Path(inp.file.cwd))
            )
        except ApplicationError as err:
            return BranchSummaryResult(error=f"Branch summary failed: {err.message}")
        turns = FileTurns(inp.file, [inp.entry_id], inp.old_leaf_id)
        try:
            async with Heartbeater():
                entry = await summarize_branch_session(
                    self.store,
                    Path(inp.file.session_path),
                    inp.old_leaf_id,
                    inp.target_id,
                    inp.new_leaf_id,
                    inp.model,
                    options,
                    inp.entry_id,
                    inp.entry_timestamp,
                    inp.custom_instructions,
                )
        except CompactionError as err:
            return BranchSummaryResult(error=f"Branch summary failed: {err}")
        if entry is None:
            return BranchSummaryResult()
        with out_of_space_is_final(inp.file.session_path):
            turns.settle()
        return BranchSummaryResult(entry_id=entry.id, summary=entry.summary)

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


class _StreamProgress:
    def __init__(self, model: ModelSpec) -> None:
        self.partial = AssistantMessage(
            content=[],
            api=model.api,
            provider=model.provider,
            model=model.id,
            timestamp=int(time.time() * 1000),
        )

    def aborted(self) -> AssistantMessage:
        return self.partial.model_copy(
            update={"stop_reason": "aborted", "error_message": "Aborted by the user."}
        )


async def _stream_to_live(
    inp: LlmCallInput,
    context: LlmContext,
    options: StreamOptions,
    progress: _StreamProgress,
    live: LiveWriter,
) -> AssistantMessage:
    streamed = 0  # characters of text and thinking: a lower bound of the answer's bytes
    async with contextlib.aclosing(stream_assistant(inp.model, context, options)) as events:
        async for event in events:
            if event.type in ("text_delta", "thinking_delta"):
                streamed += len(event.delta)
                check_answer_size(streamed)  # closes the stream: the rest is not read
            delta = compact_delta(event)
            if delta is not None:
                live.write(delta)
            if event.type == "done":
                return event.message
            if event.type == "error":
                return event.error
            progress.partial = event.partial
    raise RuntimeError("the provider stream ended without a final message")


def encodable(message: ToolResultMessage) -> ToolResultMessage:
    """The result with text that UTF-8 can carry: a file name that is not valid UTF-8 (a
    lone surrogate from os.fsdecode) gets the \\xHH form the tools accept back."""
    data = message.to_json_dict()
    if not holds_lone_surrogate(data):
        return message
    return ToolResultMessage.model_validate(escape_value(data))


# A parked result larger than this crosses history as a shortened copy; the model gets the
# whole result from the session file. Temporal refuses payloads over 2 MB.
HISTORY_RESULT_BYTES = 1_000_000
_HISTORY_TEXT_CHARS = 100_000


def for_history(message: ToolResultMessage) -> ToolResultMessage:
    """What the workflow receives for a parked result: the result itself, or, near the
    payload limit, a copy without images and with long texts cut (events show that copy)."""
    if len(json.dumps(message.to_json_dict(), ensure_ascii=False).encode("utf-8")) <= HISTORY_RESULT_BYTES:
        return message
    content: list[TextContent | ImageContent] = []
    for block in message.content:
        if isinstance(block, ImageContent):
            size = len(block.data) * 3 // 4
            text = f"[{block.mime_type} image of {size / 1_000_000:.1f} MB: sent to the model, too large to show here]"
            content.append(TextContent(text=text))
        elif len(block.text) > _HISTORY_TEXT_CHARS:
            cut = block.text[:_HISTORY_TEXT_CHARS]
            content.append(
                TextContent(
                    text=f"{cut}\n\n[{len(block.text)} characters in all: shortened here, sent whole to the model]"
                )
            )
        else:
            content.append(block)
    details = message.details
    if len(json.dumps(details, ensure_ascii=False)) > _HISTORY_TEXT_CHARS:
        details = {"omitted": "too large to show; kept in the session file"}
    return message.model_copy(update={"content": content, "details": details})


def _llm_result(message: AssistantMessage) -> LlmCallResult:
    return LlmCallResult(
        message=message,
        error_kind=classify_error(message),
        retry_after_ms=retry_after_ms(message),
    )
