"""The provider messages of a session's last call, kept so the next call converts only what
is new (issue 13).

A running session sends the same conversation plus a turn or two on every call. Repair
(`transform.py`) and a provider's conversion are folds over the messages from the first,
so the fold's state is kept at the last turn boundary (before a user or assistant message,
when no tool call is waiting for its result) and the next call starts from there if its
messages begin with the ones that state has seen. Messages are compared by identity first
(the worker's session store keeps the parsed entries), then by value, so a branch switch, a
compaction, an edited model or a fresh worker simply converts from the start: the result is
the same either way, only the work differs.

The provider dicts before the boundary are shared between calls and never changed after
it: a converter only ever extends the message it just appended, and marks it puts on the
last message (anthropic's cache breakpoint) go on a copy. Their JSON is kept too, so the
body sent is mostly joined from bytes encoded once.
"""

from __future__ import annotations

import copy
import json
import operator
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self

from tempi.activities.llm.transform import ConversationRepair
from tempi.agent.messages import LlmMessage, ToolResultMessage
from tempi.agent.model_spec import ModelSpec

# Sessions whose state a worker keeps (a busy worker runs about this many at once), and
# the JSON kept for them all: a 1,000-turn session's body is about 2 MB.
MAX_SESSIONS = 256
MAX_ENCODED_BYTES = 64 * 1024 * 1024


class MessageConverter(Protocol):
    """A provider's conversion of repaired messages, one at a time."""

    def copy(self) -> Self: ...

    def close_turn(self) -> None:
        """Before a user or assistant message: emit what waits for the end of a run of tool
        results."""

    def add(self, message: LlmMessage) -> None: ...

    def result(self) -> list[dict[str, Any]]:
        """The converted messages, closed as at the end of the conversation, leaving this
        converter able to go on."""

    def shared(self) -> list[dict[str, Any]]:
        """The messages converted so far, which nothing changes from here on."""


class ListConverter:
    """The state every provider's converter starts from: the messages converted so far. A
    subclass adds to `converted` and copies in `copy` whatever else it keeps that changes."""

    def __init__(self) -> None:
        self.converted: list[dict[str, Any]] = []

    def copy(self) -> Self:
        twin = copy.copy(self)
        twin.converted = list(self.converted)
        return twin

    def close_turn(self) -> None:
        """Nothing waits for the end of a run of tool results."""

    def shared(self) -> list[dict[str, Any]]:
        return self.converted

    def result(self) -> list[dict[str, Any]]:
        return list(self.converted)


def append_tool_result(
    converted: list[dict[str, Any]], result: dict[str, Any], joins: Callable[[list[Any]], bool]
) -> None:
    """`result` added to the user message before it when that one holds tool results
    (`joins` of its content), else in a user message of its own: every result of a turn in
    one message, as Anthropic's and Bedrock's APIs want them."""
    previous = converted[-1] if converted else None
    if previous is not None and previous["role"] == "user" and joins(previous["content"]):
        # Replaced, not extended: an earlier call's state may share the message.
        converted[-1] = {**previous, "content": [*previous["content"], result]}
    else:
        converted.append({"role": "user", "content": [result]})


def _close_turn(repair: ConversationRepair, converter: MessageConverter) -> None:
    for repaired in repair.close_turn():
        converter.add(repaired)
    converter.close_turn()


@dataclass
class _Checkpoint:
    model: ModelSpec
    seen: list[LlmMessage]  # the messages folded into the state below
    repair: ConversationRepair
    converter: MessageConverter
    encoded: _Encoded | None = None


@dataclass(frozen=True)
class _Encoded:
    items: list[dict[str, Any]]  # a converter's fixed messages, held so they stay themselves
    chunks: list[bytes]  # their JSON, comma-separated once joined
    size: int


# (provider API, session id); a call without a session id converts from the start and keeps
# nothing.
CacheKey = tuple[str, str | None]


class ConversationCache:
    """Per session and provider API, the fold state at the last call's last turn boundary."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, max_encoded_bytes: int = MAX_ENCODED_BYTES) -> None:
        self._max = max_sessions
        self._max_bytes = max_encoded_bytes
        self._checkpoints: OrderedDict[CacheKey, _Checkpoint] = OrderedDict()
        self._encoded_bytes = 0  # the sum of the checkpoints' kept JSON
        self.resumed = 0  # calls that went on from a checkpoint, for tests and benchmarks
        self.restarted = 0

    def convert(
        self,
        key: CacheKey,
        messages: Sequence[LlmMessage],
        model: ModelSpec,
        start: Callable[[], tuple[ConversationRepair, MessageConverter]],
    ) -> list[dict[str, Any]]:
        checkpoint = self._checkpoints.get(key) if key[1] is not None else None
        if checkpoint is not None and _continues(checkpoint, messages, model):
            begin = len(checkpoint.seen)
            repair, converter = checkpoint.repair.copy(), checkpoint.converter.copy()
            self.resumed += 1
        else:
            begin = 0
            repair, converter = start()
            self.restarted += 1
        # The state is kept at the last boundary only: copying it at each would make a
        # conversion from the start quadratic.
        last = _last_boundary(messages)
        kept: tuple[ConversationRepair, MessageConverter] | None = None
        for index in range(begin, len(messages)):
            message = messages[index]
            if not isinstance(message, ToolResultMessage):
                _close_turn(repair, converter)
                if index == last:
                    kept = (repair.copy(), converter.copy())
            for repaired in repair.add(message):
                converter.add(repaired)
        for repaired in repair.close_turn():
            converter.add(repaired)
        result = converter.result()
        if kept is not None and key[1] is not None:
            encoded = checkpoint.encoded if checkpoint is not None else None
            self._checkpoints[key] = _Checkpoint(model, list(messages[:last]), *kept, encoded)
            self._checkpoints.move_to_end(key)
            while len(self._checkpoints) > self._max:
                self._set_encoded(self._checkpoints.popitem(last=False)[1], None)
        return result

    def encode(self, key: CacheKey, body: dict[str, Any], list_field: str) -> bytes:
        """`body` as the compact JSON the OpenAI SDK would send. The messages before the
        last boundary are the kept state's own dicts; their JSON is kept with them and
        extended by the new ones, so only the messages since are encoded."""
        items: list[dict[str, Any]] = body[list_field]
        checkpoint = self._checkpoints.get(key) if key[1] is not None else None
        shared = checkpoint.converter.shared() if checkpoint is not None else []
        at = _position(items, shared)
        if checkpoint is None or at < 0:
            return _dumps(body)
        old = checkpoint.encoded
        done = 0
        chunks: list[bytes] = []
        if old is not None and len(old.items) <= len(shared) and _is_run(items, at, old.items):
            done, chunks = len(old.items), list(old.chunks)
        fresh = [_dumps(item) for item in items[at + done : at + len(shared)]]
        if fresh:
            # One chunk per call, each starting with its separator: the body is then joined
            # once, instead of the kept JSON being copied into a longer one on every call.
            chunks.append(b"".join(b"," + f for f in fresh) if chunks else b",".join(fresh))
        self._set_encoded(checkpoint, _Encoded(shared, chunks, sum(map(len, chunks))))
        self._forget_oldest_json(key)
        pieces: list[bytes] = [b"{"]
        for number, (name, value) in enumerate(body.items()):
            pieces.append(b"," + _dumps(name) + b":" if number else _dumps(name) + b":")
            if name != list_field:
                pieces.append(_dumps(value))
                continue
            head = [_dumps(item) for item in items[:at]]
            tail = [_dumps(item) for item in items[at + len(shared) :]]
            pieces.append(b"[")
            pieces.append(b",".join(head))
            if head and chunks:
                pieces.append(b",")
            pieces.extend(chunks)
            if tail and (head or chunks):
                pieces.append(b",")
            pieces.append(b",".join(tail))
            pieces.append(b"]")
        pieces.append(b"}")
        return b"".join(pieces)

    def _set_encoded(self, checkpoint: _Checkpoint, encoded: _Encoded | None) -> None:
        old = checkpoint.encoded
        self._encoded_bytes += (encoded.size if encoded is not None else 0) - (
            old.size if old is not None else 0
        )
        checkpoint.encoded = encoded

    def _forget_oldest_json(self, keep: CacheKey) -> None:
        for key, checkpoint in self._checkpoints.items():
            if self._encoded_bytes <= self._max_bytes:
                return
            if key != keep:
                self._set_encoded(checkpoint, None)


def _position(items: list[dict[str, Any]], shared: list[dict[str, Any]]) -> int:
    """Where the run of `shared` begins in `items` (after a system message or two), or -1."""
    if not shared:
        return 0
    for at in range(min(3, len(items))):
        if items[at] is shared[0] and _is_run(items, at, shared):
            return at
    return -1


def _is_run(items: list[dict[str, Any]], at: int, run: list[dict[str, Any]]) -> bool:
    return len(items) >= at + len(run) and all(map(operator.is_, items[at : at + len(run)], run))


def _last_boundary(messages: Sequence[LlmMessage]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if not isinstance(messages[index], ToolResultMessage):
            return index
    return -1


def _continues(checkpoint: _Checkpoint, messages: Sequence[LlmMessage], model: ModelSpec) -> bool:
    seen = checkpoint.seen
    n = len(seen)
    if len(messages) <= n or isinstance(messages[n], ToolResultMessage) or checkpoint.model != model:
        return False
    if all(map(operator.is_, messages[:n], seen)):
        return True
    # Equal messages convert the same (a summary rebuilt on each load, a reloaded session).
    return all(a is b or a == b for a, b in zip(messages[:n], seen, strict=True))


def _dumps(value: Any) -> bytes:
    # What the OpenAI SDK sends for a dict body (openapi_dumps).
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


CONVERSATIONS = ConversationCache()
