"""read: a file's lines, or an image as an attachment."""

from __future__ import annotations

from tempi.agent.llm_context import ToolSpec
from tempi.agent.tools.definition import MAX_KB, ToolDefinition, number, object_schema, string
from tempi.agent.truncation import DEFAULT_MAX_LINES

DEFINITION = ToolDefinition(
    spec=ToolSpec(
        name="read",
        description=(
            "Read a file. Text comes back as lines; images (png, jpg, gif, webp) come back as "
            f"image attachments. Text output stops after {DEFAULT_MAX_LINES} lines or {MAX_KB}KB, "
            "whichever comes first, and then says which offset to continue from. Use offset and "
            "limit to page through large files."
        ),
        parameters=object_schema(
            {
                "path": string("File to read, relative to the working directory or absolute"),
                "offset": number("First line to return, counting from 1"),
                "limit": number("Most lines to return"),
            },
            ["path"],
        ),
    ),
    effect="reads",
)
