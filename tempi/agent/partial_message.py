"""Rebuilds pi's `message_update` events from compact stream deltas.

Streaming deltas travel without the `partial` snapshot pi puts on every event (that would
make their size grow with the square of the message length). A watcher replays them onto
the `message_start` message to recover exactly what pi would have shown.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tempi.agent.json_depth import MAX_JSON_DEPTH, text_depth
from tempi.agent.stream_events import AssistantMessageEvent

# Streaming arguments are re-parsed for display on every delta while short; past this only
# when they have grown by a quarter (linear, not quadratic, in a long `write`), and not at all
# past the size a worker accepts or the depth it parses: such a call is refused when it ends.
_ALWAYS_REPARSE_BELOW = 2048
_SHOW_ARGUMENTS_BELOW = 1_000_000


def compact_delta(event: AssistantMessageEvent) -> dict[str, Any] | None:
    """The wire form of one provider event: no `partial`, plus the new block on starts."""
    if event.type in ("start", "done", "error"):
        return None
    data = event.to_json_dict()
    partial = data.pop("partial")
    if event.type.endswith("_start"):
        data["block"] = partial["content"][data["contentIndex"]]
    return data


def _parse_partial_json(raw: str) -> dict[str, Any]:
    """Best-effort parse of an unfinished JSON object, for display while it streams."""
    if text_depth(raw) > MAX_JSON_DEPTH:
        return {}
    try:
        value = json.loads(raw)
        return value if isinstance(value, dict) else {}
    except ValueError:
        pass
    for closer in ('"}', "}", '"]}', "]}", "null}"):
        try:
            value = json.loads(raw + closer)
            return value if isinstance(value, dict) else {}
        except ValueError:
            continue
    return {}


class PartialMessage:
    def __init__(self, start_message: dict[str, Any]) -> None:
        self.message = copy.deepcopy(start_message)
        self.message.setdefault("content", [])
        self._raw_args: dict[int, str] = {}
        self._parsed_len: dict[int, int] = {}
        self._ended: set[int] = set()

    def apply(self, delta: dict[str, Any]) -> dict[str, Any]:
        """Apply one compact delta; returns the pi `message_update` event for it."""
        kind = delta["type"]
        index = delta["contentIndex"]
        content: list[dict[str, Any]] = self.message["content"]
        if kind.endswith("_start"):
            block = copy.deepcopy(delta.get("block") or {})
            while len(content) <= index:
                content.append({})
            content[index] = block
        elif kind == "text_delta":
            content[index]["text"] = content[index].get("text", "") + delta["delta"]
        elif kind == "thinking_delta":
            content[index]["thinking"] = content[index].get("thinking", "") + delta["delta"]
        elif kind == "toolcall_delta":
            raw = self._raw_args.get(index, "") + delta["delta"]
            self._raw_args[index] = raw
            parsed_len = self._parsed_len.get(index, 0)
            if len(raw) <= _SHOW_ARGUMENTS_BELOW and (
                len(raw) < _ALWAYS_REPARSE_BELOW or len(raw) - parsed_len >= parsed_len // 4
            ):
                content[index]["arguments"] = _parse_partial_json(raw)
                self._parsed_len[index] = len(raw)
        if kind.endswith("_end"):
            self._ended.add(index)
        if kind == "text_end":
            content[index]["text"] = delta["content"]
        elif kind == "thinking_end":
            content[index]["thinking"] = delta["content"]
        elif kind == "toolcall_end":
            content[index] = copy.deepcopy(delta["toolCall"])
        snapshot = copy.deepcopy(self.message)
        # pi's key order: type, contentIndex, then the event's own fields.
        event = {"type": kind, "contentIndex": index}
        event.update((k, v) for k, v in delta.items() if k not in ("block", "type", "contentIndex"))
        event["partial"] = snapshot
        return {"type": "message_update", "assistantMessageEvent": event, "message": snapshot}

    def catch_up(self, final_message: dict[str, Any]) -> list[dict[str, Any]]:
        """Compact deltas from what was applied so far to `final_message`: the tail of a
        stream whose live file was removed before this watcher read all of it."""
        out: list[dict[str, Any]] = []
        content: list[dict[str, Any]] = self.message["content"]
        for index, block in enumerate(final_message.get("content", [])):
            if index in self._ended:
                continue
            kind = block.get("type")
            if index >= len(content) or not content[index]:
                out.extend(_block_deltas(index, block))
            elif kind in ("text", "thinking"):
                seen: str = content[index].get(kind, "")
                whole: str = block.get(kind, "")
                if len(whole) > len(seen) and whole.startswith(seen):
                    out.append({"type": f"{kind}_delta", "contentIndex": index, "delta": whole[len(seen) :]})
                out.append({"type": f"{kind}_end", "contentIndex": index, "content": whole})
            elif kind == "toolCall":
                out.append({"type": "toolcall_end", "contentIndex": index, "toolCall": block})
        return out


def synthesize_deltas(final_message: dict[str, Any]) -> list[dict[str, Any]]:
    """Compact deltas that rebuild a finished message, for watchers that missed the stream."""
    out: list[dict[str, Any]] = []
    for index, block in enumerate(final_message.get("content", [])):
        out.extend(_block_deltas(index, block))
    return out


def _block_deltas(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    kind = block.get("type")
    if kind == "text":
        return [
            {"type": "text_start", "contentIndex": index, "block": {"type": "text", "text": ""}},
            *(
                [{"type": "text_delta", "contentIndex": index, "delta": block["text"]}]
                if block["text"]
                else []
            ),
            {"type": "text_end", "contentIndex": index, "content": block["text"]},
        ]
    if kind == "thinking":
        start = {k: v for k, v in block.items() if k not in ("thinking", "thinkingSignature")}
        start["thinking"] = ""
        return [
            {"type": "thinking_start", "contentIndex": index, "block": start},
            *(
                [{"type": "thinking_delta", "contentIndex": index, "delta": block["thinking"]}]
                if block["thinking"]
                else []
            ),
            {"type": "thinking_end", "contentIndex": index, "content": block["thinking"]},
        ]
    if kind == "toolCall":
        args = json.dumps(block.get("arguments", {}))
        return [
            {"type": "toolcall_start", "contentIndex": index, "block": {**block, "arguments": {}}},
            {"type": "toolcall_delta", "contentIndex": index, "delta": args},
            {"type": "toolcall_end", "contentIndex": index, "toolCall": block},
        ]
    return []
