"""find: file names matching a glob."""

from __future__ import annotations

from tempi.agent.llm_context import ToolSpec
from tempi.agent.tools.definition import MAX_KB, ToolDefinition, number, object_schema, string

FIND_DEFAULT_LIMIT = 1000

DEFINITION = ToolDefinition(
    spec=ToolSpec(
        name="find",
        description=(
            "List files whose name matches a glob pattern, e.g. '*.py', '**/*.json' or "
            "'src/**/test_*.py'. A pattern without '/' matches file names at any depth. Paths are "
            "relative to the searched directory; .gitignore is honoured and hidden files are "
            f"included. Stops after {FIND_DEFAULT_LIMIT} results or {MAX_KB}KB."
        ),
        parameters=object_schema(
            {
                "pattern": string("Glob pattern for the files to list"),
                "path": string("Directory to search (default: the working directory)"),
                "limit": number(f"Most results to return (default {FIND_DEFAULT_LIMIT})"),
            },
            ["pattern"],
        ),
    ),
    effect="reads",
)
