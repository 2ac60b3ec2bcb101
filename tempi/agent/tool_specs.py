"""The registry of coding tools: every tool's definition (`tempi.agent.tools.<name>`),
and what the workflow asks of them: specs for LLM requests, each call's effect, and
which file a call changes.

Pure data, no I/O: workflows import this to build LLM requests, to decide which tool
calls may run in parallel, and to pick a tool activity's retry policy.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.llm_context import ToolSpec
from tempi.agent.messages import UserBlock
from tempi.agent.tools import attach, bash, edit, find, grep, ls, read, write
from tempi.agent.tools.definition import ToolDefinition, ToolEffect

# The order is the one ALL_TOOLS lists and error messages name the tools in.
TOOL_DEFINITIONS: dict[str, ToolDefinition] = {
    module.DEFINITION.name: module.DEFINITION for module in (read, bash, edit, write, grep, find, ls, attach)
}

# pi's coding tools, which `--tools` offers; `attach` is for front ends that upload what it names.
FRONT_END_TOOLS: tuple[str, ...] = (attach.ATTACH_TOOL,)
ALL_TOOLS: tuple[str, ...] = tuple(name for name in TOOL_DEFINITIONS if name not in FRONT_END_TOOLS)
DEFAULT_TOOLS: tuple[str, ...] = ("read", "bash", "edit", "write")


class ToolOutcome(PiModel):
    """The result of one tool call: content for the model, details for UIs, error flag."""

    content: list[UserBlock] = Field(default_factory=list)
    details: Any = None
    is_error: bool = False


def tool_specs(names: Sequence[str]) -> list[ToolSpec]:
    """Specs for the named tools, in the order given."""
    unknown = [name for name in names if name not in TOOL_DEFINITIONS]
    if unknown:
        raise ValueError(f"unknown tool(s) {', '.join(unknown)}; valid tools are {', '.join(ALL_TOOLS)}")
    return [TOOL_DEFINITIONS[name].spec.model_copy(deep=True) for name in names]


LABEL = "label"
LABEL_SCHEMA: dict[str, Any] = {
    "type": "string",
    "description": "A few words on what this call does, shown to the people following along",
}


def labelled(specs: Sequence[ToolSpec]) -> list[ToolSpec]:
    """The specs with a required `label` first in each (mom's tools all take one); tools
    ignore it, and a spec that already has a label keeps its own."""
    out = []
    for spec in specs:
        params = spec.parameters
        if params.get("type") != "object" or LABEL in params.get("properties", {}):
            out.append(spec)
            continue
        required = [LABEL, *params.get("required", [])]
        properties = {LABEL: LABEL_SCHEMA, **params.get("properties", {})}
        out.append(
            spec.model_copy(update={"parameters": {**params, "properties": properties, "required": required}})
        )
    return out


# Tools the model call's activity may run itself, as soon as the answer is written, when an
# answer calls nothing else (tempi/activities/early_reads.py): they only read and end quickly.
EARLY_TOOLS = frozenset({"read", "ls"})


def tool_effect(name: str) -> ToolEffect:
    """The declared effect of a call to `name`.

    A name with no definition counts as `executes`: that covers `task`, whose child
    workflows must not start twice (the workflow routes it before any tool activity),
    and any name a model makes up, so nothing unclassified is ever run more than once.
    """
    definition = TOOL_DEFINITIONS.get(name)
    return definition.effect if definition is not None else "executes"


def is_read_only(name: str) -> bool:
    """True for tools that never change the workspace; they may run in parallel and retry freely."""
    return tool_effect(name) == "reads"


def mutated_path(name: str, args: Any) -> str | None:
    """The file a write/edit call changes, normalised lexically (not resolved against a cwd),
    so calls on the same file can be serialised. None for other tools or unusable args."""
    definition = TOOL_DEFINITIONS.get(name)
    if definition is None or definition.path_argument is None or not isinstance(args, dict):
        return None
    path = args.get(definition.path_argument)
    if not isinstance(path, str) or not path.strip():
        return None
    return posixpath.normpath(path.strip().removeprefix("@"))
