"""Requests made with a Claude Pro/Max login (an OAuth token, `sk-ant-oat…`), as pi 0.73.1 makes
them: Bearer auth, Claude Code's beta flags and identity (user agent, `x-app`, a first system
block), and tool names in Claude Code's casing (`Read`, `Bash`, …), mapped back on the way in."""

from __future__ import annotations

from typing import Any

from tempi.agent.llm_context import ToolSpec

CLAUDE_CODE_VERSION = "2.1.75"
IDENTITY = "You are Claude Code, Anthropic's official CLI for Claude."
OAUTH_BETAS = "claude-code-20250219,oauth-2025-04-20"
_CLAUDE_CODE_TOOLS = (
    "Read", "Write", "Edit", "Bash", "Grep", "Glob", "AskUserQuestion", "EnterPlanMode", "ExitPlanMode",
    "KillShell", "NotebookEdit", "Skill", "Task", "TaskOutput", "TodoWrite", "WebFetch", "WebSearch",
)  # fmt: skip
_BY_LOWER = {name.lower(): name for name in _CLAUDE_CODE_TOOLS}


def is_oauth_token(key: str) -> bool:
    return "sk-ant-oat" in key


def oauth_headers(betas: str | None) -> dict[str, str]:
    """Claude Code's identity headers; `betas` are the ones an API key would send."""
    return {
        "anthropic-beta": f"{OAUTH_BETAS},{betas}" if betas else OAUTH_BETAS,
        "user-agent": f"claude-cli/{CLAUDE_CODE_VERSION}",
        "x-app": "cli",
    }


def to_claude_code_name(name: str) -> str:
    return _BY_LOWER.get(name.lower(), name)


def from_claude_code_name(name: str, tools: list[ToolSpec]) -> str:
    """The session's own tool a name in Claude Code's casing stands for."""
    return next((tool.name for tool in tools if tool.name.lower() == name.lower()), name)


def _renamed_tool_uses(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return message
    return {
        **message,
        "content": [
            {**block, "name": to_claude_code_name(block["name"])}
            if block.get("type") == "tool_use"
            else block
            for block in content
        ],
    }


def oauth_body(body: dict[str, Any]) -> dict[str, Any]:
    """The body an API key would send, turned into the one a login sends (a copy)."""
    system = body.get("system") or []
    cache = system[0].get("cache_control") if system else {"type": "ephemeral"}
    identity: dict[str, Any] = {"type": "text", "text": IDENTITY}
    if cache:
        identity["cache_control"] = cache
    changed = {
        **body,
        "system": [identity, *system],
        "messages": [_renamed_tool_uses(m) for m in body["messages"]],
    }
    if "tools" in body:
        changed["tools"] = [{**tool, "name": to_claude_code_name(tool["name"])} for tool in body["tools"]]
    return changed
