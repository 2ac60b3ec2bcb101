"""edit: exact-text replacements in one file."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from tempi.agent.llm_context import ToolSpec
from tempi.agent.tools.definition import ToolDefinition, object_schema, string


def prepare_edit_args(args: Any) -> Any:
    """Accept pi's older single-edit form (top-level oldText/newText) and an edits list
    sent as a JSON string, both of which models still produce."""
    if not isinstance(args, dict):
        return args
    args = dict(args)
    edits = args.get("edits")
    if isinstance(edits, str):
        with contextlib.suppress(ValueError):
            args["edits"] = edits = json.loads(edits)
    if "oldText" in args or "newText" in args:
        legacy = {"oldText": args.pop("oldText", None), "newText": args.pop("newText", None)}
        args["edits"] = [*(edits if isinstance(edits, list) else []), legacy]
    return args


DEFINITION = ToolDefinition(
    spec=ToolSpec(
        name="edit",
        description=(
            "Change a file by exact text replacement. Each edits[].oldText must match exactly one "
            "place in the file as it was before this call, and no two edits may overlap; if any "
            "edit fails, nothing is written. Merge changes to the same or neighbouring lines into "
            "one edit, and keep oldText short: just enough lines to be unique."
        ),
        # additionalProperties false at both levels, as pi's edit schema: the OpenAI APIs get
        # the schema as it is (Anthropic's input_schema keeps only properties and required).
        parameters={
            **object_schema(
                {
                    "path": string("File to edit, relative to the working directory or absolute"),
                    "edits": {
                        "type": "array",
                        "description": (
                            "Replacements, each matched against the original file (not applied one "
                            "after another). They must not overlap or nest."
                        ),
                        "items": {
                            "type": "object",
                            "properties": {
                                "oldText": string(
                                    "Text to replace, exactly as in the file; unique in the file and "
                                    "not overlapping any other edit"
                                ),
                                "newText": string("Text to put in its place"),
                            },
                            "required": ["oldText", "newText"],
                            "additionalProperties": False,
                        },
                    },
                },
                ["path", "edits"],
            ),
            "additionalProperties": False,
        },
    ),
    effect="writes",
    path_argument="path",
    prepare_args=prepare_edit_args,
)
