"""An in-process scripted provider (`api="faux"`) for tests that need no network.

Tests register the answers a model id should give; each call takes the next one and
streams it through the same assembler the real providers use, so the event sequence is
the one a real provider produces.
"""

from __future__ import annotations

import json
import secrets
from collections import deque
from collections.abc import AsyncGenerator

from tempi.activities.llm.abort import AbortWatch
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.contract import StreamOptions
from tempi.activities.llm.demo_script import DEMO_MODEL_ID, demo_response
from tempi.activities.llm.errors import ProviderError, StreamAborted
from tempi.activities.llm.faux_responses import FauxResponse, FauxScript, FauxUsage
from tempi.agent.llm_context import LlmContext
from tempi.agent.messages import TextContent, ToolResultMessage, UserMessage
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import AssistantMessageEvent

# Text and arguments are streamed in pieces of this many characters.
CHUNK_SIZE = 16


_scripts: dict[str, deque[FauxScript]] = {}


def register_faux(model_id: str, responses: list[FauxScript]) -> None:
    """Queue the answers for `model_id`; each call consumes the next (a callable sees the context)."""
    _scripts.setdefault(model_id, deque()).extend(responses)


def clear_faux(model_id: str | None = None) -> None:
    if model_id is None:
        _scripts.clear()
    else:
        _scripts.pop(model_id, None)


def _next_response(model: ModelSpec, context: LlmContext) -> FauxResponse:
    queue = _scripts.get(model.id)
    if not queue and model.id == DEMO_MODEL_ID:
        return demo_response(context)
    if not queue:
        raise ProviderError(f"The faux model '{model.id}' has no scripted response left")
    script = queue.popleft()
    return script(context) if callable(script) else script


async def stream_faux(
    model: ModelSpec,
    context: LlmContext,
    options: StreamOptions,
    assembler: MessageAssembler,
    abort: AbortWatch,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    response = _next_response(model, context)
    delay = response.delay_ms / 1000
    assembler.set_response_id(f"faux-{secrets.token_hex(6)}")

    async def pace(event: AssistantMessageEvent) -> AssistantMessageEvent:
        if delay:
            await abort.sleep(delay)
        abort.check()
        return event

    if response.thinking:
        thinking = assembler.begin_thinking(signature="faux")
        yield await pace(thinking)
        for piece in _pieces(response.thinking):
            yield await pace(assembler.add_thinking(thinking.content_index, piece))
        yield await pace(assembler.end_thinking(thinking.content_index))
    if response.text:
        text = assembler.begin_text()
        yield await pace(text)
        for piece in _pieces(response.text):
            yield await pace(assembler.add_text(text.content_index, piece))
        yield await pace(assembler.end_text(text.content_index))
    for call in response.tool_calls:
        tool = assembler.begin_tool_call(call.id or f"faux_{secrets.token_hex(6)}", call.name)
        yield await pace(tool)
        arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
        for piece in _pieces(arguments):
            yield await pace(assembler.add_tool_arguments(tool.content_index, piece))
        yield await pace(assembler.end_tool_call(tool.content_index))

    usage = response.usage or _estimated_usage(context, response)
    assembler.set_usage(
        input=usage.input, output=usage.output, cache_read=usage.cache_read, cache_write=usage.cache_write
    )
    stop_reason = response.stop_reason or ("toolUse" if response.tool_calls else "stop")
    if stop_reason == "aborted":
        raise StreamAborted()
    if stop_reason == "error":
        raise ProviderError(response.error_message or "The faux provider was scripted to fail")
    assembler.set_stop_reason(stop_reason)


def _pieces(text: str) -> list[str]:
    return [text[i : i + CHUNK_SIZE] for i in range(0, len(text), CHUNK_SIZE)]


def _estimated_usage(context: LlmContext, response: FauxResponse) -> FauxUsage:
    chars = len(context.system_prompt)
    for message in context.messages:
        if isinstance(message, (UserMessage, ToolResultMessage)):
            chars += len(message.text())
        else:
            chars += sum(len(b.text) for b in message.content if isinstance(b, TextContent))
            chars += sum(len(json.dumps(call.arguments)) for call in message.tool_calls())
    produced = len(response.text or "") + len(response.thinking or "")
    produced += sum(len(json.dumps(call.arguments)) for call in response.tool_calls)
    return FauxUsage(input=chars // 4 + 1, output=produced // 4 + 1)
