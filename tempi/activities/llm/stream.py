"""The one entry point for model calls: pick the provider, guarantee the event contract."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncGenerator

from tempi.activities.llm.abort import AbortWatch
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.contract import ProviderStream, StreamOptions
from tempi.activities.llm.errors import ABORTED_MESSAGE, ProviderError, StreamAborted, describe_exception
from tempi.agent.llm_context import LlmContext
from tempi.agent.messages import AssistantMessage
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent, DoneEvent, ErrorEvent

# Module and function of each API's provider. A provider's module (and its SDK, whose import
# takes seconds of CPU) loads on its first call, so a worker starts without any of them and
# loads only those its models use.
PROVIDERS: dict[str, tuple[str, str]] = {
    "anthropic-messages": ("tempi.activities.llm.anthropic_messages", "stream_anthropic_messages"),
    "openai-completions": ("tempi.activities.llm.openai_completions", "stream_openai_completions"),
    "openai-responses": ("tempi.activities.llm.openai_responses", "stream_openai_responses"),
    "azure-openai-responses": (
        "tempi.activities.llm.azure_openai_responses",
        "stream_azure_openai_responses",
    ),
    "openai-codex-responses": (
        "tempi.activities.llm.openai_codex_responses",
        "stream_openai_codex_responses",
    ),
    "mistral-conversations": ("tempi.activities.llm.mistral_conversations", "stream_mistral_conversations"),
    "google-generative-ai": ("tempi.activities.llm.google_generative_ai", "stream_google_generative_ai"),
    "google-vertex": ("tempi.activities.llm.google_vertex", "stream_google_vertex"),
    "bedrock-converse-stream": ("tempi.activities.llm.bedrock_converse", "stream_bedrock_converse"),
    "faux": ("tempi.activities.llm.faux", "stream_faux"),
}


# Filled only once a provider's import has finished: a module in sys.modules may still be
# half-imported by another call's thread.
_loaded: dict[str, ProviderStream] = {}


async def load_provider(api: str) -> ProviderStream | None:
    loaded = _loaded.get(api)
    if loaded is not None:
        return loaded  # no thread hop on every model call
    where = PROVIDERS.get(api)
    if where is None:
        return None
    module_name, function = where
    # Off the event loop: the first import of an SDK would stall every other activity and
    # heartbeat of the worker meanwhile.
    module = await asyncio.to_thread(importlib.import_module, module_name)
    provider: ProviderStream = getattr(module, function)
    _loaded[api] = provider
    return provider


async def stream_assistant(
    model: ModelSpec,
    context: LlmContext,
    options: StreamOptions,
    abort: asyncio.Event | None = None,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    """Stream one assistant message.

    Yields `start`, the content events, then exactly one `done` or `error`. Failures of any
    kind end in an `error` event (reason "aborted" once `abort` is set) that keeps the
    content received so far. Only task cancellation propagates, after the HTTP stream is closed.
    """
    assembler = MessageAssembler(model)
    watch = AbortWatch(abort)
    yield assembler.start()
    final: AssistantMessageEvent
    try:
        provider = await load_provider(model.api)
        if provider is None:
            known = ", ".join(sorted(PROVIDERS))
            raise ProviderError(f"Unknown API '{model.api}' for model '{model.id}' (known: {known})")
        watch.check()
        async with contextlib.aclosing(provider(model, context, options, assembler, watch)) as events:
            async for event in events:
                yield event
        watch.check()
        final = assembler.done()
    except StreamAborted:
        final = assembler.failed(ABORTED_MESSAGE, aborted=True)
    except Exception as exc:
        # Closing the stream on abort can surface as a connection error; the abort is the cause.
        message = ABORTED_MESSAGE if watch.aborted else describe_exception(exc)
        final = assembler.failed(message, aborted=watch.aborted)
    finally:
        await watch.close()
    yield final


async def complete(
    model: ModelSpec,
    context: LlmContext,
    options: StreamOptions,
    abort: asyncio.Event | None = None,
) -> AssistantMessage:
    """The final assistant message of `stream_assistant` (an error message on failure)."""
    async with contextlib.aclosing(stream_assistant(model, context, options, abort)) as events:
        async for event in events:
            if isinstance(event, DoneEvent):
                return event.message
            if isinstance(event, ErrorEvent):
                return event.error
    raise AssertionError("stream_assistant ended without a final event")
