"""The model call activity: the turn's outbox written, the context built from the session
file, the answer streamed to the live channel and appended as the turn's entry."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from weakref import WeakKeyDictionary

from temporalio import activity
from temporalio.exceptions import ApplicationError

from tempi.activities.early_reads import run_early
from tempi.activities.file_turns import FileTurns, anchor_of, file_changed, outbox_ids
from tempi.activities.heartbeat import Heartbeater
from tempi.activities.llm import StreamOptions, classify_error, retry_after_ms, stream_assistant
from tempi.activities.llm.answer_size import check_answer_size
from tempi.activities.metrics import record_model_call
from tempi.activities.model_options import CredentialResolver, stream_options
from tempi.activities.out_of_space import out_of_space_is_final
from tempi.activities.sandbox_policy import check_sandbox
from tempi.activities.session_outbox import append_outbox
from tempi.activities.spans import llm_span, record_usage
from tempi.agent.blocked_images import without_images
from tempi.agent.llm_context import LlmContext
from tempi.agent.llm_conversion import GrowingConversion
from tempi.agent.messages import AssistantMessage
from tempi.agent.model_spec import ModelSpec
from tempi.agent.partial_message import compact_delta
from tempi.agent.session_entries import MessageEntry
from tempi.agent.session_tree import SessionTree
from tempi.agent.tool_specs import labelled, tool_specs
from tempi.config.settings import settings_at_call
from tempi.extensions.hooks import context_for, with_context_hooks
from tempi.extensions.models import ExtensionEffects, ExtensionProblem
from tempi.extensions.run_events import turn_hooks
from tempi.store.live_channel import LiveWriter
from tempi.store.session_store import SessionStore
from tempi.store.sidecar import live_path
from tempi.workflows import activity_names as names
from tempi.workflows.activity_payloads import LlmCallInput, LlmCallResult, ToolCallInput, ToolCallResult

WORKER_STOPPED_TEXT = "The worker stopped while the model was answering; the call is retried when one runs."

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


class LlmCallActivities:
    """The model call of `SessionActivities`."""

    store: SessionStore
    credentials: CredentialResolver

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
                return await self._with_early_reads(inp, _llm_result(existing.message))

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
        options = await stream_options(
            self.credentials, inp.model, inp.thinking_level, inp.file.session_id, settings
        )
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
        return await self._with_early_reads(
            inp,
            _llm_result(final).model_copy(
                update={"problems": problems, "effects": None if effects.empty() else effects}
            ),
        )

    async def _with_early_reads(self, inp: LlmCallInput, result: LlmCallResult) -> LlmCallResult:
        if not inp.early_read_ids:
            return result
        early = await run_early(self.run_early_tool, inp, result.message)
        return result.model_copy(update={"early_results": early}) if early else result

    async def run_early_tool(self, inp: ToolCallInput) -> ToolCallResult:
        """One of an answer's reads, as the tool activity runs it (SessionActivities)."""
        raise NotImplementedError


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


def _llm_result(message: AssistantMessage) -> LlmCallResult:
    return LlmCallResult(
        message=message,
        error_kind=classify_error(message),
        retry_after_ms=retry_after_ms(message),
    )
