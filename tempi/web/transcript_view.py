"""A session's conversation as the console shows it: one block of the HTML export's markup
per message (the export's renderer, so the console and the export cannot drift), kept
up to date from pi's event stream.

Blocks have increasing integer keys; a block is sent again whole when it changes (the
streaming assistant message, a tool call getting its output or result), and the page
puts each block at its key, appending keys it has not seen."""

from __future__ import annotations

from html import escape
from typing import Any

from tempi.cli.export_entries import local_time, message_html
from tempi.cli.html_export import WHO

Op = dict[str, Any]


class TranscriptView:
    def __init__(self) -> None:
        self._messages: dict[int, dict[str, Any]] = {}
        self._results: dict[str, dict[str, Any]] = {}
        self._owner: dict[str, int] = {}  # tool call id -> key of the assistant message
        self._dirty: set[int] = set()
        self._live: int | None = None  # the assistant message streaming now
        self._next = 0

    def history(self, messages: list[dict[str, Any]]) -> list[Op]:
        """Blocks for messages already in the session (pi's context messages)."""
        for message in messages:
            if message.get("role") == "toolResult":
                self._results[str(message.get("toolCallId"))] = message
        for message in messages:
            if message.get("role") != "toolResult":
                self._add(message)
        return self.flush()

    def apply(self, event: dict[str, Any]) -> None:
        """Take in one pi event; `flush` then gives the blocks it changed."""
        kind = event.get("type")
        message = event.get("message")
        if kind == "message_start" and isinstance(message, dict) and message.get("role") == "assistant":
            self._live = self._add(message)
        elif kind == "message_update" and self._live is not None and isinstance(message, dict):
            self._set(self._live, message)
        elif kind == "message_end" and isinstance(message, dict):
            self._message_end(message)
        elif kind == "tool_execution_update":
            partial = event.get("partialResult") or {}
            call_id = str(event.get("toolCallId"))
            if call_id not in self._results or self._results[call_id].get("partial"):
                self._results[call_id] = {"content": partial.get("content") or [], "partial": True}
                self._touch_owner(call_id)

    def _message_end(self, message: dict[str, Any]) -> None:
        role = message.get("role")
        if role == "assistant":
            if self._live is None:
                self._live = self._add(message)
            self._set(self._live, message)
            self._live = None
        elif role == "toolResult":
            call_id = str(message.get("toolCallId"))
            self._results[call_id] = message
            self._touch_owner(call_id)
        else:
            self._add(message)

    def _add(self, message: dict[str, Any]) -> int:
        key = self._next
        self._next += 1
        self._set(key, message)
        return key

    def _set(self, key: int, message: dict[str, Any]) -> None:
        self._messages[key] = message
        self._dirty.add(key)
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "toolCall" and block.get("id"):
                self._owner[str(block["id"])] = key

    def _touch_owner(self, call_id: str) -> None:
        if call_id in self._owner:
            self._dirty.add(self._owner[call_id])

    @staticmethod
    def stamps(messages: list[dict[str, Any]]) -> list[tuple[str, int]]:
        """Each shown message's role and time: what tells one branch from another."""
        return [
            (str(m.get("role")), int(m.get("timestamp") or 0))
            for m in messages
            if m.get("role") != "toolResult"
        ]

    def shown(self) -> list[tuple[str, int]]:
        return self.stamps([self._messages[key] for key in sorted(self._messages)])

    def flush(self) -> list[Op]:
        ops = [{"op": "block", "key": key, "html": self._article(key)} for key in sorted(self._dirty)]
        self._dirty.clear()
        return ops

    def _article(self, key: int) -> str:
        message = self._messages[key]
        css, inner = message_html(message, self._results)
        live = key == self._live
        if not inner and not live:
            return ""
        role = str(message.get("role"))
        who = (
            str(message.get("customType") or WHO.get(role, role)) if role == "custom" else WHO.get(role, role)
        )
        meta = local_time(message.get("timestamp"))
        if role == "assistant":
            meta = f"{meta} · {message.get('provider', '')}/{message.get('model', '')}"
        streaming = " streaming" if live else ""
        body = inner or '<div class="dim">…</div>'
        return (
            f'<article class="msg {css or escape(role)}{streaming}" data-role="{escape(role)}">'
            f'<header class="msg-head"><span class="who">{escape(who)}</span>'
            f'<span class="meta">{escape(meta)}</span></header>{body}</article>'
        )
