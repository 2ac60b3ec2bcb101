"""attach: share a workspace file in the chat a front end serves (mom's attach tool).

The tool itself only checks and names the file; the front end that sees the call end
(the Slack conversation workflow) uploads it, so no tool ever holds a chat token."""

from __future__ import annotations

from tempi.agent.llm_context import ToolSpec
from tempi.agent.tools.definition import ToolDefinition, object_schema, string

ATTACH_TOOL = "attach"

DEFINITION = ToolDefinition(
    spec=ToolSpec(
        name=ATTACH_TOOL,
        description=(
            "Share a file from the working directory with the people you are talking to "
            "(images, documents, reports). Only files inside the working directory can be shared."
        ),
        parameters=object_schema(
            {
                "label": string("A few words on what you are sharing (shown to people)"),
                "path": string("The file to share, relative to the working directory or absolute"),
                "title": string("The file's title (default: its name)"),
            },
            ["label", "path"],
        ),
    ),
    effect="reads",
)
