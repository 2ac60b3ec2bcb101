"""The seven coding tools as the model and the workflow see them: names, JSON-schema
parameters, which ones only read, which file a call mutates, and the outcome shape.

Pure data, no I/O: workflows import this to build LLM requests and to decide which
tool calls may run in parallel.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.llm_context import ToolSpec
from tempi.agent.messages import UserBlock
from tempi.agent.truncation import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, GREP_MAX_LINE_CHARS

ALL_TOOLS = ("read", "bash", "edit", "write", "grep", "find", "ls")
DEFAULT_TOOLS = ("read", "bash", "edit", "write")
READ_ONLY_TOOLS = frozenset({"read", "grep", "find", "ls"})
MUTATING_TOOLS = frozenset({"write", "edit"})

GREP_DEFAULT_LIMIT = 100
FIND_DEFAULT_LIMIT = 1000
LS_DEFAULT_LIMIT = 500

_KB = DEFAULT_MAX_BYTES // 1024


class ToolOutcome(PiModel):
    """The result of one tool call: content for the model, details for UIs, error flag."""

    content: list[UserBlock] = Field(default_factory=list)
    details: Any = None
    is_error: bool = False


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _number(description: str) -> dict[str, Any]:
    return {"type": "number", "description": description}


def _boolean(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_SPECS: dict[str, ToolSpec] = {
    "read": ToolSpec(
        name="read",
        description=(
            "Read a file. Text comes back as lines; images (png, jpg, gif, webp) come back as "
            f"image attachments. Text output stops after {DEFAULT_MAX_LINES} lines or {_KB}KB, "
            "whichever comes first, and then says which offset to continue from. Use offset and "
            "limit to page through large files."
        ),
        parameters=_object(
            {
                "path": _string("File to read, relative to the working directory or absolute"),
                "offset": _number("First line to return, counting from 1"),
                "limit": _number("Most lines to return"),
            },
            ["path"],
        ),
    ),
    "bash": ToolSpec(
        name="bash",
        description=(
            "Run a bash command in the working directory; stdout and stderr are returned together. "
            f"Only the last {DEFAULT_MAX_LINES} lines or {_KB}KB are returned (whichever is smaller); "
            "when output is cut, the full output is saved to a file whose path is given. "
            "Pass timeout in seconds to limit how long the command may run."
        ),
        parameters=_object(
            {
                "command": _string("The bash command to run"),
                "timeout": _number("Seconds before the command is killed (no limit when omitted)"),
            },
            ["command"],
        ),
    ),
    "edit": ToolSpec(
        name="edit",
        description=(
            "Change a file by exact text replacement. Each edits[].oldText must match exactly one "
            "place in the file as it was before this call, and no two edits may overlap; if any "
            "edit fails, nothing is written. Merge changes to the same or neighbouring lines into "
            "one edit, and keep oldText short: just enough lines to be unique."
        ),
        parameters=_object(
            {
                "path": _string("File to edit, relative to the working directory or absolute"),
                "edits": {
                    "type": "array",
                    "description": (
                        "Replacements, each matched against the original file (not applied one "
                        "after another). They must not overlap or nest."
                    ),
                    "items": {
                        "type": "object",
                        "properties": {
                            "oldText": _string(
                                "Text to replace, exactly as in the file; unique in the file and "
                                "not overlapping any other edit"
                            ),
                            "newText": _string("Text to put in its place"),
                        },
                        "required": ["oldText", "newText"],
                        "additionalProperties": False,
                    },
                },
            },
            ["path", "edits"],
        ),
    ),
    "write": ToolSpec(
        name="write",
        description=(
            "Write a file with the given content, replacing it if it exists. Missing parent "
            "directories are created."
        ),
        parameters=_object(
            {
                "path": _string("File to write, relative to the working directory or absolute"),
                "content": _string("The complete new content of the file"),
            },
            ["path", "content"],
        ),
    ),
    "grep": ToolSpec(
        name="grep",
        description=(
            "Search file contents with a regular expression (or a literal string). Prints matching "
            "lines as path:line: text, relative to the searched directory. Honours .gitignore and "
            f"includes hidden files. Stops after {GREP_DEFAULT_LIMIT} matches or {_KB}KB of output; "
            f"lines longer than {GREP_MAX_LINE_CHARS} characters are cut."
        ),
        parameters=_object(
            {
                "pattern": _string("Regular expression to look for, or plain text with literal=true"),
                "path": _string("Directory or file to search (default: the working directory)"),
                "glob": _string(
                    "Only search files whose path matches this glob, e.g. '*.py' or 'src/**/*.ts'"
                ),
                "ignoreCase": _boolean("Match regardless of letter case (default false)"),
                "literal": _boolean("Treat the pattern as plain text, not a regex (default false)"),
                "context": _number("Lines of context to show around each match (default 0)"),
                "limit": _number(f"Most matches to return (default {GREP_DEFAULT_LIMIT})"),
            },
            ["pattern"],
        ),
    ),
    "find": ToolSpec(
        name="find",
        description=(
            "List files whose name matches a glob pattern, e.g. '*.py', '**/*.json' or "
            "'src/**/test_*.py'. A pattern without '/' matches file names at any depth. Paths are "
            "relative to the searched directory; .gitignore is honoured and hidden files are "
            f"included. Stops after {FIND_DEFAULT_LIMIT} results or {_KB}KB."
        ),
        parameters=_object(
            {
                "pattern": _string("Glob pattern for the files to list"),
                "path": _string("Directory to search (default: the working directory)"),
                "limit": _number(f"Most results to return (default {FIND_DEFAULT_LIMIT})"),
            },
            ["pattern"],
        ),
    ),
    "ls": ToolSpec(
        name="ls",
        description=(
            "List a directory: entries sorted by name, directories marked with a trailing '/', "
            f"hidden entries included. Stops after {LS_DEFAULT_LIMIT} entries or {_KB}KB."
        ),
        parameters=_object(
            {
                "path": _string("Directory to list (default: the working directory)"),
                "limit": _number(f"Most entries to return (default {LS_DEFAULT_LIMIT})"),
            },
            [],
        ),
    ),
}


def tool_specs(names: Sequence[str]) -> list[ToolSpec]:
    """Specs for the named tools, in the order given."""
    unknown = [name for name in names if name not in _SPECS]
    if unknown:
        raise ValueError(f"unknown tool(s) {', '.join(unknown)}; valid tools are {', '.join(ALL_TOOLS)}")
    return [_SPECS[name].model_copy(deep=True) for name in names]


def is_read_only(name: str) -> bool:
    """True for tools that never change the workspace; they may run in parallel and retry freely."""
    return name in READ_ONLY_TOOLS


def mutated_path(name: str, args: Any) -> str | None:
    """The file a write/edit call changes, normalised lexically (not resolved against a cwd),
    so calls on the same file can be serialised. None for other tools or unusable args."""
    if name not in MUTATING_TOOLS or not isinstance(args, dict):
        return None
    path = args.get("path")
    if not isinstance(path, str) or not path.strip():
        return None
    return posixpath.normpath(path.strip().removeprefix("@"))
