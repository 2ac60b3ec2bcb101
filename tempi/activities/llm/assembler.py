"""Builds the assistant message of one call and the events that describe each step.

Every provider speaks through a MessageAssembler, so all of them produce the same event
sequence with the same bookkeeping: content indices, partial snapshots, tool-call JSON
accumulation, usage and cost.
"""

from __future__ import annotations

import time
from typing import Any, Literal, TypeVar, cast

from tempi.activities.llm.cost import priced_usage
from tempi.activities.llm.partial_json import parse_arguments, parse_partial_arguments
from tempi.activities.llm.unicode_guard import (
    SURROGATE_ESCAPE,
    JsonDeltaGuard,
    clean_optional,
    clean_text,
    clean_value,
    holds_lone_surrogate,
)
from tempi.activities.tools.invalid_call import (
    MAX_TOOL_ARGUMENTS_BYTES,
    invalid_arguments,
    not_unicode_reason,
    too_deep_reason,
    too_large_reason,
)
from tempi.agent.json_depth import MAX_JSON_DEPTH, text_depth
from tempi.agent.messages import (
    AssistantBlock,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
)
from tempi.agent.model_spec import ModelSpec
from tempi.agent.stream_events import (
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

B = TypeVar("B", TextContent, ThinkingContent, ToolCall)

# Below this size partial tool arguments are re-parsed on every delta; above it only when
# the JSON has grown by a quarter, which keeps a long `write` call linear instead of quadratic.
_ALWAYS_REPARSE_BELOW = 2048

REDACTED_THINKING_TEXT = "[Reasoning redacted by the provider]"


def now_ms() -> int:
    return int(time.time() * 1000)


class MessageAssembler:
    def __init__(self, model: ModelSpec) -> None:
        self.model = model
        self.message = AssistantMessage(
            api=model.api, provider=model.provider, model=model.id, timestamp=now_ms()
        )
        self._open: list[int] = []
        self._tool_json: dict[int, str] = {}
        self._parsed_len: dict[int, int] = {}
        self._guards: dict[int, JsonDeltaGuard] = {}
        # Tool calls whose JSON may decode to a lone surrogate: their arguments are checked.
        self._suspect: set[int] = set()
        self._arguments_bytes = 0  # of the tool calls accepted so far

    # -- message-level -------------------------------------------------------------

    def snapshot(self) -> AssistantMessage:
        # The message and its blocks change only by having fields reassigned (a longer text,
        # freshly parsed arguments), so copying the message, its block list and each block
        # freezes this moment. A deep copy per delta was 6% of a busy worker's time.
        return self.message.model_copy(
            update={"content": [block.model_copy() for block in self.message.content]}
        )

    def start(self) -> StartEvent:
        return StartEvent(partial=self.snapshot())

    def set_stop_reason(self, reason: StopReason) -> None:
        self.message.stop_reason = reason

    def set_response_id(self, response_id: str | None) -> None:
        if response_id:
            self.message.response_id = clean_text(response_id)

    def set_usage(self, *, input: int, output: int, cache_read: int = 0, cache_write: int = 0) -> None:
        self.message.usage = priced_usage(
            self.model.cost,
            input=max(0, input),
            output=max(0, output),
            cache_read=max(0, cache_read),
            cache_write=max(0, cache_write),
        )

    def has_tool_calls(self) -> bool:
        return any(isinstance(block, ToolCall) for block in self.message.content)

    def done(self) -> DoneEvent:
        reason = self.message.stop_reason
        if reason not in ("stop", "length", "toolUse"):
            raise ValueError(f"a finished message cannot have stop reason {reason!r}")
        self.message.error_message = None
        return DoneEvent(reason=cast(Literal["stop", "length", "toolUse"], reason), message=self.snapshot())

    def failed(self, error_message: str, *, aborted: bool) -> ErrorEvent:
        for index in list(self._open):
            block = self.message.content[index]
            if isinstance(block, ToolCall):
                block.arguments = self._checked_arguments(index, partial=True)
        self._open.clear()
        self.message.stop_reason = "aborted" if aborted else "error"
        self.message.error_message = clean_text(error_message)
        return ErrorEvent(reason="aborted" if aborted else "error", error=self.snapshot())

    # -- blocks --------------------------------------------------------------------

    def is_open(self, index: int) -> bool:
        return index in self._open

    def end_open_blocks(self) -> list[AssistantMessageEvent]:
        """End events for every block still open, in content order."""
        events: list[AssistantMessageEvent] = []
        for index in sorted(self._open):
            block = self.message.content[index]
            if isinstance(block, TextContent):
                events.append(self.end_text(index))
            elif isinstance(block, ThinkingContent):
                events.append(self.end_thinking(index))
            else:
                events.append(self.end_tool_call(index))
        return events

    def begin_text(self) -> TextStart:
        index = self._append(TextContent(text=""))
        return TextStart(content_index=index, partial=self.snapshot())

    def add_text(self, index: int, delta: str) -> TextDelta:
        block = self._block(index, TextContent)
        delta = clean_text(delta)
        block.text += delta
        return TextDelta(content_index=index, delta=delta, partial=self.snapshot())

    def end_text(self, index: int, *, text: str | None = None, signature: str | None = None) -> TextEnd:
        block = self._block(index, TextContent)
        if text is not None:
            block.text = clean_text(text)
        if signature:
            block.text_signature = clean_text(signature)
        self._close(index)
        return TextEnd(content_index=index, content=block.text, partial=self.snapshot())

    def begin_thinking(
        self, *, text: str = "", signature: str | None = None, redacted: bool = False
    ) -> ThinkingStart:
        block = ThinkingContent(
            thinking=clean_text(text), thinking_signature=clean_optional(signature), redacted=redacted or None
        )
        index = self._append(block)
        return ThinkingStart(content_index=index, partial=self.snapshot())

    def add_thinking(self, index: int, delta: str) -> ThinkingDelta:
        block = self._block(index, ThinkingContent)
        delta = clean_text(delta)
        block.thinking += delta
        return ThinkingDelta(content_index=index, delta=delta, partial=self.snapshot())

    def add_thinking_signature(self, index: int, part: str) -> None:
        block = self._block(index, ThinkingContent)
        block.thinking_signature = (block.thinking_signature or "") + clean_text(part)

    def end_thinking(
        self, index: int, *, text: str | None = None, signature: str | None = None
    ) -> ThinkingEnd:
        block = self._block(index, ThinkingContent)
        if text is not None:
            block.thinking = clean_text(text)
        if signature:
            block.thinking_signature = clean_text(signature)
        self._close(index)
        return ThinkingEnd(content_index=index, content=block.thinking, partial=self.snapshot())

    def begin_tool_call(
        self, call_id: str, name: str, arguments_json: str = "", *, thought_signature: str | None = None
    ) -> ToolCallStart:
        call = ToolCall(
            id=clean_text(call_id), name=clean_text(name), thought_signature=clean_optional(thought_signature)
        )
        index = self._append(call)
        self._tool_json[index] = ""
        self._guards[index] = JsonDeltaGuard()
        if arguments_json:
            self._extend_tool_json(index, arguments_json)
        return ToolCallStart(content_index=index, partial=self.snapshot())

    def rename_tool_call(self, index: int, *, call_id: str | None = None, name: str | None = None) -> None:
        block = self._block(index, ToolCall)
        if call_id:
            block.id = clean_text(call_id)
        if name:
            block.name = clean_text(name)

    def add_tool_arguments(self, index: int, delta: str) -> ToolCallDelta:
        self._extend_tool_json(index, delta)
        # Watchers rebuild the arguments from these pieces, so they must decode cleanly too.
        shown = self._guards.setdefault(index, JsonDeltaGuard()).feed(delta)
        return ToolCallDelta(content_index=index, delta=shown, partial=self.snapshot())

    def tool_arguments_json(self, index: int) -> str:
        return self._tool_json.get(index, "")

    def end_tool_call(self, index: int, *, arguments_json: str | None = None) -> ToolCallEnd:
        """Close a tool call; arguments that are not a JSON object become `{}`."""
        block = self._block(index, ToolCall)
        if arguments_json is not None:
            self._tool_json[index] = arguments_json
            self._note_suspect(index, arguments_json)
        block.arguments = self._checked_arguments(index, partial=False)
        self._tool_json[index] = ""  # no longer needed; a rejected call's JSON can be megabytes
        self._close(index)
        return ToolCallEnd(
            content_index=index, tool_call=block.model_copy(deep=True), partial=self.snapshot()
        )

    # -- internals -----------------------------------------------------------------

    def _append(self, block: AssistantBlock) -> int:
        self.message.content.append(block)
        index = len(self.message.content) - 1
        self._open.append(index)
        return index

    def _close(self, index: int) -> None:
        if index in self._open:
            self._open.remove(index)

    def _block(self, index: int, kind: type[B]) -> B:
        block = self.message.content[index]
        if not isinstance(block, kind):
            raise TypeError(f"content block {index} is a {block.type}, not a {kind.__name__}")
        return block

    def _note_suspect(self, index: int, delta: str) -> None:
        # An escape split across two deltas is caught too: the previous few characters are
        # searched with the new ones.
        tail = self._tool_json.get(index, "")[-(len(delta) + 5) :]
        if clean_text(delta) is not delta or SURROGATE_ESCAPE.search(tail):
            self._suspect.add(index)

    def _extend_tool_json(self, index: int, delta: str) -> None:
        text = self._tool_json.get(index, "") + delta
        self._tool_json[index] = text
        self._note_suspect(index, delta)
        parsed_len = self._parsed_len.get(index, 0)
        if len(text) > MAX_TOOL_ARGUMENTS_BYTES:
            return  # refused when it ends; what was shown so far stays
        if len(text) < _ALWAYS_REPARSE_BELOW or len(text) - parsed_len >= parsed_len // 4:
            # Arguments nested too deeply are refused when they end; until then nothing shows.
            arguments = parse_partial_arguments(text) if text_depth(text) <= MAX_JSON_DEPTH else {}
            if index in self._suspect:
                arguments = clean_value(arguments)
            self._block(index, ToolCall).arguments = arguments
            self._parsed_len[index] = len(text)

    def _checked_arguments(self, index: int, *, partial: bool) -> dict[str, Any]:
        """The call's arguments, or the reason they were refused in their place: arguments
        holding a lone surrogate, nested deeper than MAX_JSON_DEPTH (pydantic's serializer,
        Temporal's converter and the session file's reader all recurse per level), or too
        large for what one message may carry."""
        text = self._tool_json.get(index, "")
        size = len(text.encode("utf-8", "surrogatepass"))
        if self._arguments_bytes + size > MAX_TOOL_ARGUMENTS_BYTES:
            return invalid_arguments(too_large_reason(size, MAX_TOOL_ARGUMENTS_BYTES, self._arguments_bytes))
        depth = text_depth(text)
        if depth > MAX_JSON_DEPTH:
            return invalid_arguments(too_deep_reason(depth, MAX_JSON_DEPTH))
        arguments = parse_partial_arguments(text) if partial else parse_arguments(text or "{}")
        if index in self._suspect and holds_lone_surrogate(arguments):
            if partial:
                return clean_value(arguments)  # never run, only shown
            return invalid_arguments(not_unicode_reason())
        self._arguments_bytes += size
        return arguments
