"""The tests' extension for pi's prompt and run events: before_agent_start puts a reminder
into the conversation (a handler that returns a message without content is reported); the
input handler drops "ping", rewrites "shout ..." and fails on "explode"; the first
compaction's summary is its own, a later one is cancelled."""

from __future__ import annotations

from typing import Any


def extension(tempi: Any) -> None:
    def remind(event: Any, ctx: Any) -> dict[str, Any]:
        return {"message": {"customType": "reminder", "content": f"Reminder for {event.prompt!r}: be brief."}}

    def typed(event: Any, ctx: Any) -> dict[str, Any] | None:
        if event.text == "ping":
            return {"action": "handled"}
        if event.text == "explode":
            raise RuntimeError("input broke")
        if event.text.startswith("shout "):
            return {"action": "transform", "text": f"{event.text[6:].upper()} (via {event.source})"}
        return None

    def compacting(event: Any, ctx: Any) -> dict[str, Any]:
        if event.previous_summary is not None:
            return {"cancel": True}
        count = len(event.messages_to_summarize)
        return {
            "compaction": {"summary": f"Summary by the events extension: {count} messages ({event.reason})."}
        }

    tempi.on("input", typed)
    tempi.on("session_before_compact", compacting)
    tempi.on("before_agent_start", remind)
    tempi.on("before_agent_start", lambda event, ctx: {"message": {"customType": "empty"}})
