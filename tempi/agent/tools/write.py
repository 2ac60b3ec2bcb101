"""write: a whole file's new content."""

from __future__ import annotations

from tempi.agent.llm_context import ToolSpec
from tempi.agent.tools.definition import ToolDefinition, object_schema, string

DEFINITION = ToolDefinition(
    spec=ToolSpec(
        name="write",
        description=(
            "Write a file with the given content, replacing it if it exists. Missing parent "
            "directories are created."
        ),
        parameters=object_schema(
            {
                "path": string("File to write, relative to the working directory or absolute"),
                "content": string("The complete new content of the file"),
            },
            ["path", "content"],
        ),
    ),
    effect="writes",
    path_argument="path",
)
