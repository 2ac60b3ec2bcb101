"""Conversation repair before a call: make any stored conversation acceptable to the target API.

A session can mix models and providers, hold turns that failed half-way, or end with tool
calls whose results never arrived (a crash, an abort). Providers reject such input, so it
is normalised here, with pure functions, before any request is built.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container, Sequence
from dataclasses import dataclass

from tempi.agent.messages import (
    AssistantBlock,
    AssistantMessage,
    ImageContent,
    LlmMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserBlock,
    UserMessage,
)
from tempi.agent.model_spec import ModelSpec

MISSING_RESULT_TEXT = "No result provided"
IMAGE_OMITTED_TEXT = "(image omitted: this model does not accept images)"

_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class ToolIdFormat:
    """What tool-call ids the target API accepts."""

    max_length: int
    # OpenAI Responses ids are `call_id|item_id`; the item id only means something to the model that made it.
    keep_same_model_ids: bool = False

    def normalize(self, raw: str, *, same_model: bool) -> str:
        if self.keep_same_model_ids and same_model:
            return raw
        call_part = raw.split("|", 1)[0] or raw
        return _UNSAFE_ID_CHARS.sub("_", call_part)[: self.max_length] or "call"

    def alternative(self, raw: str, normalized: str, taken: Container[str]) -> str:
        """Another id for `raw`, whose `normalized` form another call already has."""
        digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
        return f"{normalized[: self.max_length - 9]}_{digest}"


ANTHROPIC_TOOL_IDS = ToolIdFormat(max_length=64)
OPENAI_CHAT_TOOL_IDS = ToolIdFormat(max_length=40)
OPENAI_RESPONSES_TOOL_IDS = ToolIdFormat(max_length=64, keep_same_model_ids=True)


def is_same_model(message: AssistantMessage, model: ModelSpec) -> bool:
    return message.provider == model.provider and message.api == model.api and message.model == model.id


def repair_conversation(messages: list[LlmMessage], model: ModelSpec, ids: ToolIdFormat) -> list[LlmMessage]:
    """The conversation as `model` may receive it.

    - assistant turns that ended in an error or were aborted are left out;
    - thinking from another model becomes plain text (redacted thinking is dropped), while
      the same model gets its thinking back with signatures;
    - empty text blocks and messages left empty are removed;
    - images become a text placeholder when the model is text-only;
    - tool-call ids are rewritten to what the API accepts, results follow their call;
    - calls left without a result get an error result, results without a call are dropped.
    """
    repair = ConversationRepair(model, ids)
    repaired: list[LlmMessage] = []
    for message in messages:
        if not isinstance(message, ToolResultMessage):
            repaired.extend(repair.close_turn())
        repaired.extend(repair.add(message))
    repaired.extend(repair.close_turn())
    return repaired


class ConversationRepair:
    """`repair_conversation` one message at a time, so a caller can keep its state at a turn
    boundary and go on from there with the next call's new messages."""

    def __init__(self, model: ModelSpec, ids: ToolIdFormat) -> None:
        self.model = model
        self._ids = _IdMap(ids)
        self._pending: list[ToolCall] = []
        self._answered: set[str] = set()

    def copy(self) -> ConversationRepair:
        twin = ConversationRepair.__new__(ConversationRepair)
        twin.model = self.model
        twin._ids = self._ids.copy()
        twin._pending = list(self._pending)
        twin._answered = set(self._answered)
        return twin

    def close_turn(self) -> list[LlmMessage]:
        """Error results for the calls of the last assistant turn that no result answered;
        due before a user or assistant message, and at the end."""
        missing: list[LlmMessage] = [_missing_result(c) for c in self._pending if c.id not in self._answered]
        self._pending.clear()
        self._answered.clear()
        return missing

    def add(self, message: LlmMessage) -> list[LlmMessage]:
        """What `message` becomes (nothing, or itself repaired). Before a user or assistant
        message, `close_turn` must have been called."""
        if isinstance(message, UserMessage):
            user = _repair_user(message, self.model)
            return [] if user is None else [user]
        if isinstance(message, AssistantMessage):
            if message.stop_reason in ("error", "aborted"):
                return []
            assistant = _repair_assistant(message, self.model, self._ids)
            if assistant is None:
                return []
            self._pending.extend(assistant.tool_calls())
            return [assistant]
        call_id = self._ids.lookup(message.tool_call_id)
        if call_id is None or call_id in self._answered or all(c.id != call_id for c in self._pending):
            return []
        self._answered.add(call_id)
        return [_repair_tool_result(message, call_id, self.model)]


class _IdMap:
    """Original -> normalised tool-call ids, kept one-to-one across the conversation."""

    def __init__(self, ids: ToolIdFormat) -> None:
        self._format = ids
        self._by_original: dict[str, str] = {}
        self._taken: set[str] = set()

    def assign(self, original: str, *, same_model: bool) -> str:
        if original in self._by_original:
            return self._by_original[original]
        normalized = self._format.normalize(original, same_model=same_model)
        if normalized in self._taken:
            normalized = self._format.alternative(original, normalized, self._taken)
        self._by_original[original] = normalized
        self._taken.add(normalized)
        return normalized

    def copy(self) -> _IdMap:
        twin = _IdMap(self._format)
        twin._by_original = dict(self._by_original)
        twin._taken = set(self._taken)
        return twin

    def lookup(self, original: str) -> str | None:
        return self._by_original.get(original)


def _repair_user(message: UserMessage, model: ModelSpec) -> UserMessage | None:
    if isinstance(message.content, str):
        return message if message.content.strip() else None
    blocks = _repair_user_blocks(message.content, model)
    if not blocks:
        return None
    return message.model_copy(update={"content": blocks})


def _repair_user_blocks(blocks: list[UserBlock], model: ModelSpec) -> list[UserBlock]:
    repaired: list[UserBlock] = []
    for block in blocks:
        if isinstance(block, TextContent):
            if block.text.strip():
                repaired.append(block)
        elif isinstance(block, ImageContent) and not model.supports_images:
            repaired.append(TextContent(text=IMAGE_OMITTED_TEXT))
        else:
            repaired.append(block)
    return repaired


def _repair_assistant(message: AssistantMessage, model: ModelSpec, ids: _IdMap) -> AssistantMessage | None:
    same_model = is_same_model(message, model)
    blocks: list[AssistantBlock] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if block.redacted:
                if same_model:
                    blocks.append(block)
            elif same_model:
                if block.thinking.strip() or block.thinking_signature:
                    blocks.append(block)
            elif block.thinking.strip():
                blocks.append(TextContent(text=block.thinking))
        elif isinstance(block, TextContent):
            if not block.text.strip():
                continue
            blocks.append(block if same_model else TextContent(text=block.text))
        else:
            call_id = ids.assign(block.id, same_model=same_model)
            if call_id == block.id and (same_model or block.thought_signature is None):
                blocks.append(block)
                continue
            update: dict[str, object] = {"id": call_id}
            if not same_model:
                update["thought_signature"] = None
            blocks.append(block.model_copy(update=update))
    if not blocks:
        return None
    if _same_blocks(blocks, message.content):
        return message  # the usual case, a long session's every turn: nothing to copy
    return message.model_copy(update={"content": blocks})


def _same_blocks(repaired: Sequence[object], original: Sequence[object]) -> bool:
    return len(repaired) == len(original) and all(a is b for a, b in zip(repaired, original, strict=True))


def _repair_tool_result(message: ToolResultMessage, call_id: str, model: ModelSpec) -> ToolResultMessage:
    content: list[UserBlock] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                content.append(block)
        elif model.supports_images:
            content.append(block)
        else:
            content.append(TextContent(text=IMAGE_OMITTED_TEXT))
    if call_id == message.tool_call_id and _same_blocks(content, message.content):
        return message
    return message.model_copy(update={"tool_call_id": call_id, "content": content})


def _missing_result(call: ToolCall) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=[TextContent(text=MISSING_RESULT_TEXT)],
        is_error=True,
        timestamp=0,
    )
