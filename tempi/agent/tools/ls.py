"""ls: one directory's entries."""

from __future__ import annotations

from tempi.agent.llm_context import ToolSpec
from tempi.agent.tools.definition import MAX_KB, ToolDefinition, number, object_schema, string

LS_DEFAULT_LIMIT = 500

DEFINITION = ToolDefinition(
    spec=ToolSpec(
        name="ls",
        description=(
            "List a directory: entries sorted by name, directories marked with a trailing '/', "
            f"hidden entries included. Stops after {LS_DEFAULT_LIMIT} entries or {MAX_KB}KB."
        ),
        parameters=object_schema(
            {
                "path": string("Directory to list (default: the working directory)"),
                "limit": number(f"Most entries to return (default {LS_DEFAULT_LIMIT})"),
            },
            [],
        ),
    ),
    effect="reads",
)
