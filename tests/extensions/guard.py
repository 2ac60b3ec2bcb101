"""The tests' extension: blocks `rm -rf` in bash, marks what read returns, adds a line to
the system prompt, and registers tools (one removes this very file, to show a worker that
cannot load an extension any more)."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel


class Shout(BaseModel):
    text: str
    times: int = 1


def extension(tempi: Any) -> None:
    def guard(event: Any, ctx: Any) -> dict[str, Any] | None:
        if "boom" in event.input.get("command", ""):
            raise ValueError("the guard broke")
        if event.tool_name == "mcp__local__record":
            return {"block": True, "reason": "the guard keeps the MCP log read-only"}
        if event.tool_name == "mcp__local__lookup":
            event.input["key"] = event.input["key"] + "-checked"
        if event.tool_name == "bash" and "rm -rf" in event.input.get("command", ""):
            return {"block": True, "reason": "rm -rf is not allowed here (guard extension)"}
        if event.tool_name == "bash" and event.input.get("command") == "echo original":
            event.input["command"] = "echo rewritten-by-guard"
        return None

    async def mark_reads(event: Any, ctx: Any) -> dict[str, Any] | None:
        if event.tool_name != "read" or event.is_error:
            return None
        text = "".join(b.get("text", "") for b in event.content)
        return {"content": f"[checked by guard in {os.path.basename(ctx.cwd)}]\n{text}"}

    def add_rules(event: Any, ctx: Any) -> dict[str, Any]:
        return {
            "systemPrompt": event.system_prompt + f"\n\nGuard rule: never delete files ({event.prompt!r})."
        }

    async def shout(args: Shout, update: Any) -> str:
        update("shouting")
        return " ".join([args.text.upper()] * args.times)

    async def self_destruct(args: dict[str, Any], update: Any) -> str:
        os.remove(__file__)
        return "gone"

    tempi.on("tool_call", guard)
    tempi.on("tool_result", mark_reads)
    tempi.on("before_agent_start", add_rules)
    tempi.register_tool("shout", "Say the text loudly.", Shout, shout, effect="idempotent")
    tempi.register_tool(
        "self_destruct",
        "Remove the guard extension's file.",
        {"type": "object", "properties": {}},
        self_destruct,
        effect="execute",
    )
