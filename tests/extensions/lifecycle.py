"""The tests' lifecycle extension: notes session_start and each agent_start in custom
entries; a second session_start handler fails."""

from __future__ import annotations

from typing import Any


def extension(tempi: Any) -> None:
    def started(event: Any, ctx: Any) -> None:
        tempi.append_entry("lifecycle", {"event": event.type})

    tempi.on("session_start", started)
    tempi.on("agent_start", started)
    tempi.on("session_start", lambda event, ctx: 1 / 0)
