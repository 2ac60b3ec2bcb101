"""The tests' extension for pi's prompt and run events: before_agent_start puts a reminder
into the conversation (a handler that returns a message without content is reported); the
input handler drops "ping", rewrites "shout ..." and fails on "explode"."""

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

    tempi.on("input", typed)
    tempi.on("before_agent_start", remind)
    tempi.on("before_agent_start", lambda event, ctx: {"message": {"customType": "empty"}})
