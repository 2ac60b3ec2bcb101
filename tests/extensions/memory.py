"""The tests' stateful extension: a counter kept in the session's custom entries, a tool
that sends a steering message, and slash commands."""

from __future__ import annotations

from typing import Any


def extension(tempi: Any) -> None:
    async def count(args: dict[str, Any], update: Any) -> str:
        n = len(tempi.entries("counter")) + 1
        tempi.append_entry("counter", {"n": n})
        return f"count is {n}"

    async def nudge(args: dict[str, Any], update: Any) -> str:
        tempi.send_message(args["text"], deliver_as=args.get("as", "steer"))
        return "sent"

    def greet(args: str, ctx: Any) -> str:
        return f"Say hello to {args or 'everyone'}."

    def remind(args: str, ctx: Any) -> str:
        where = "on screen" if ctx.has_ui else "without a screen"
        ctx.ui.notify(f"Reminder about {args} queued ({where}).", "warning")
        tempi.send_message(f"Remember to check {args}.", deliver_as="follow_up")
        return f"Start on {args}."

    empty = {"type": "object", "properties": {}}
    tempi.register_tool("count", "Count one more.", empty, count, effect="write")
    tempi.register_tool(
        "nudge",
        "Send a message into the session.",
        {"type": "object", "properties": {"text": {"type": "string"}, "as": {"type": "string"}}},
        nudge,
        effect="execute",
    )
    tempi.register_command("greet", "Ask the model to greet someone", greet)
    tempi.register_command("remind", "Start on something and queue a reminder", remind)
