"""A tempi extension: copy it to ~/.tempi/extensions/ or .tempi/extensions/ in a project,
or pass it with `tempi --extension examples/extensions/guard.py`.

It refuses `rm -rf` in bash (the model is told why), tells the model about the rule before
each run, counts the commands it refused in the session file, and adds a `refusals` tool
and a `/refusals` command."""

from __future__ import annotations

from typing import Any


def extension(tempi: Any) -> None:
    def refused() -> int:
        return len(tempi.entries("guard.refused"))

    def guard(event: Any, ctx: Any) -> dict[str, Any] | None:
        # Runs on the worker, inside the activity that runs the tool.
        if event.tool_name == "bash" and "rm -rf" in event.input.get("command", ""):
            tempi.append_entry("guard.refused", {"command": event.input["command"]})
            return {
                "block": True,
                "reason": "rm -rf is not allowed in this project; remove files one by one.",
            }
        return None

    def rules(event: Any, ctx: Any) -> dict[str, Any]:
        return {"systemPrompt": event.system_prompt + "\n\nNever run `rm -rf`: the guard refuses it."}

    async def refusals(args: dict[str, Any], update: Any) -> str:
        return f"The guard refused {refused()} command(s) in this session."

    def refusals_command(args: str, ctx: Any) -> str:
        # A command runs in the terminal; the text it returns is sent as the prompt.
        return "Call the refusals tool and tell me what it says."

    tempi.on("tool_call", guard)
    tempi.on("before_agent_start", rules)
    tempi.register_tool(
        "refusals",
        "How many commands the guard refused in this session.",
        {"type": "object", "properties": {}},
        refusals,
        effect="read",
    )
    tempi.register_command("refusals", "Ask how many commands the guard refused", refusals_command)
