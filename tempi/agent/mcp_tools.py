"""MCP tools as a session knows them: the name the model calls, the server and tool behind
it, the schema, and whether the server says a call may be repeated. No I/O."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.llm_context import ToolSpec
from tempi.agent.tools.definition import ToolEffect

MCP_PREFIX = "mcp__"


# What the model APIs accept as a tool name (OpenAI's and Anthropic's rule).
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model calls; characters the model APIs refuse become `_`."""
    return _NOT_IN_NAME.sub("_", f"{MCP_PREFIX}{server}__{tool}")[:MAX_NAME]


class McpTool(PiModel):
    name: str  # as the model calls it: mcp__<server>__<tool>
    server: str
    tool: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    read_only: bool = False
    idempotent: bool = False

    @property
    def effect(self) -> ToolEffect:
        """A tool the server marks read-only or idempotent may run again after a lost
        worker; any other may have changed the world and runs at most once."""
        return "reads" if self.read_only or self.idempotent else "executes"

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


class McpServerProblem(PiModel):
    server: str
    error: str


class McpToolList(PiModel):
    """What the listing activity found: the tools of the servers that answered, and why the
    others did not."""

    tools: list[McpTool] = Field(default_factory=list)
    problems: list[McpServerProblem] = Field(default_factory=list)

    def find(self, name: str) -> McpTool | None:
        return next((t for t in self.tools if t.name == name), None)
