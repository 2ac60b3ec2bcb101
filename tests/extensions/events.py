"""The tests' extension for pi's prompt and run events: before_agent_start puts a reminder
into the conversation; a handler that returns a message without content is reported."""

from __future__ import annotations

from typing import Any


def extension(tempi: Any) -> None:
    def remind(event: Any, ctx: Any) -> dict[str, Any]:
        return {"message": {"customType": "reminder", "content": f"Reminder for {event.prompt!r}: be brief."}}

    tempi.on("before_agent_start", remind)
    tempi.on("before_agent_start", lambda event, ctx: {"message": {"customType": "empty"}})
