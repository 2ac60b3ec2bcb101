"""A model call's or a tool call's live file turned into pi's update events, for one
follower: the text so far as each delta lands, a command's output as it comes."""

from __future__ import annotations

from typing import Any

from tempi.agent.partial_message import PartialMessage, synthesize_deltas
from tempi.store.live_channel import LiveReader


class AssistantStream:
    """An assistant message streaming: its deltas, and the rest made up from the final
    message where the live file was gone before it was read."""

    def __init__(self, start: dict[str, Any], reader: LiveReader | None) -> None:
        self.start = start
        self.partial = PartialMessage(start)
        self.reader = reader
        self.seen_delta = False

    def drain(self) -> list[dict[str, Any]]:
        if self.reader is None:
            return []
        deltas, restarted = self.reader.read_new()
        if restarted:
            self.partial = PartialMessage(self.start)
        out = [self.partial.apply(d) for d in deltas]
        self.seen_delta = self.seen_delta or bool(out)
        return out

    def finish(self, final: dict[str, Any]) -> list[dict[str, Any]]:
        out = self.drain()
        if not self.seen_delta:
            return [self.partial.apply(d) for d in synthesize_deltas(final)]
        # The live file goes once the next step starts; what was not read from it by then
        # is made up from the final message, so every watcher sees the whole text stream.
        return [*out, *(self.partial.apply(d) for d in self.partial.catch_up(final))]


class ToolStream:
    """A tool call running: each partial result it wrote."""

    def __init__(self, start: dict[str, Any], reader: LiveReader | None) -> None:
        self.start = start
        self.reader = reader

    def drain(self) -> list[dict[str, Any]]:
        if self.reader is None:
            return []
        items, _ = self.reader.read_new()
        return [
            {
                "type": "tool_execution_update",
                "toolCallId": self.start["toolCallId"],
                "toolName": self.start["toolName"],
                "args": self.start["args"],
                "partialResult": item["partialResult"],
            }
            for item in items
            if "partialResult" in item
        ]
