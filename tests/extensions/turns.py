"""The tests' extension for pi's turn and run events: notes each one in a custom entry; a
second turn_start handler fails on the second turn."""

from __future__ import annotations

from typing import Any


def extension(tempi: Any) -> None:
    def note(event: Any, ctx: Any) -> None:
        data: dict[str, Any] = {"event": event.type}
        if event.type == "agent_end":
            data["roles"] = [m["role"] for m in event.messages]
        else:
            data["turn"] = event.turn_index
        if event.type == "turn_end":
            data["tools"] = [r["toolCallId"] for r in event.tool_results]
            data["answer"] = "".join(
                b.get("text", "") for b in event.message["content"] if b["type"] == "text"
            )
        tempi.append_entry("run-events", data)

    def broken(event: Any, ctx: Any) -> None:
        if event.turn_index == 1:
            raise RuntimeError("turn one broke")

    for name in ("turn_start", "turn_end", "agent_end"):
        tempi.on(name, note)
    tempi.on("turn_start", broken)
