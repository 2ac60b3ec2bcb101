"""bash: a command in the working directory."""

from __future__ import annotations

from tempi.agent.llm_context import ToolSpec
from tempi.agent.tools.definition import MAX_KB, ToolDefinition, number, object_schema, string
from tempi.agent.truncation import DEFAULT_MAX_LINES

DEFINITION = ToolDefinition(
    spec=ToolSpec(
        name="bash",
        description=(
            "Run a bash command in the working directory; stdout and stderr are returned together. "
            f"Only the last {DEFAULT_MAX_LINES} lines or {MAX_KB}KB are returned (whichever is smaller); "
            "when output is cut, the full output is saved to a file whose path is given. "
            "Pass timeout in seconds to limit how long the command may run."
        ),
        parameters=object_schema(
            {
                "command": string("The bash command to run"),
                "timeout": number("Seconds before the command is killed (no limit when omitted)"),
            },
            ["command"],
        ),
    ),
    effect="executes",
)
