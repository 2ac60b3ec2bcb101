"""The tests' lifecycle extension: notes session_start and each agent_start in custom
entries; a second session_start handler fails; its context
handler sends the model only the newest prompt."""

from __future__ import annotations

from typing import Any


def extension(tempi: Any) -> None:
    def started(event: Any, ctx: Any) -> None:
        tempi.append_entry("lifecycle", {"event": event.type})

    tempi.on("session_start", started)
    tempi.on("agent_start", started)
    tempi.on("session_start", lambda event, ctx: 1 / 0)

    def forget(event: Any, ctx: Any) -> dict[str, Any]:
        # The model sees only the newest user message and what followed it.
        last_user = max(i for i, m in enumerate(event.messages) if m["role"] == "user")
        return {"messages": event.messages[last_user:]}

    tempi.on("context", forget)
