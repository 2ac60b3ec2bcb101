"""grep: lines matching a pattern, across files."""

from __future__ import annotations

from tempi.agent.llm_context import ToolSpec
from tempi.agent.tools.definition import MAX_KB, ToolDefinition, boolean, number, object_schema, string
from tempi.agent.truncation import GREP_MAX_LINE_CHARS

GREP_DEFAULT_LIMIT = 100

DEFINITION = ToolDefinition(
    spec=ToolSpec(
        name="grep",
        description=(
            "Search file contents with a regular expression (or a literal string). Prints matching "
            "lines as path:line: text, relative to the searched directory. Honours .gitignore and "
            f"includes hidden files. Stops after {GREP_DEFAULT_LIMIT} matches or {MAX_KB}KB of output; "
            f"lines longer than {GREP_MAX_LINE_CHARS} characters are cut."
        ),
        parameters=object_schema(
            {
                "pattern": string("Regular expression to look for, or plain text with literal=true"),
                "path": string("Directory or file to search (default: the working directory)"),
                "glob": string(
                    "Only search files whose path matches this glob, e.g. '*.py' or 'src/**/*.ts'"
                ),
                "ignoreCase": boolean("Match regardless of letter case (default false)"),
                "literal": boolean("Treat the pattern as plain text, not a regex (default false)"),
                "context": number("Lines of context to show around each match (default 0)"),
                "limit": number(f"Most matches to return (default {GREP_DEFAULT_LIMIT})"),
            },
            ["pattern"],
        ),
    ),
    effect="reads",
)
