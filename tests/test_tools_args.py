"""Tool specs, argument validation and the error results bad calls get."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tempi.activities.tools import TOOL_IMPLEMENTATIONS, ToolContext, ToolOutcome, execute_tool
from tempi.agent.llm_context import ToolSpec
from tempi.agent.tool_specs import (
    ALL_TOOLS,
    DEFAULT_TOOLS,
    FRONT_END_TOOLS,
    TOOL_DEFINITIONS,
    is_read_only,
    mutated_path,
    tool_effect,
    tool_specs,
)
from tempi.agent.tools.definition import ToolDefinition, object_schema, string

# What the model is told about the tools; a change is deliberate, so this digest changes with it.
SPECS_SHA256 = "041b2073f9e62008907d6f3a5f4f39aa988782a5da0e523635215a7162c41b5e"


def _text(outcome: ToolOutcome) -> str:
    return "".join(getattr(block, "text", "") for block in outcome.content)


def test_specs_cover_the_seven_tools_with_required_fields():
    specs = {spec.name: spec for spec in tool_specs(ALL_TOOLS)}
    assert set(specs) == {"read", "bash", "edit", "write", "grep", "find", "ls"}
    assert DEFAULT_TOOLS == ("read", "bash", "edit", "write")
    assert [spec.name for spec in tool_specs(["ls", "read"])] == ["ls", "read"]
    required = {name: spec.parameters["required"] for name, spec in specs.items()}
    assert required == {
        "read": ["path"], "bash": ["command"], "edit": ["path", "edits"], "write": ["path", "content"],
        "grep": ["pattern"], "find": ["pattern"], "ls": [],
    }  # fmt: skip
    assert specs["edit"].parameters["properties"]["edits"]["items"]["required"] == ["oldText", "newText"]


def test_unknown_tool_names_are_rejected_with_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown tool.*nope.*read, bash, edit, write, grep, find, ls"):
        tool_specs(["read", "nope"])


def test_the_specs_sent_to_the_model_are_unchanged():
    sent = json.dumps([spec.to_json_dict() for spec in tool_specs(ALL_TOOLS)])
    assert ALL_TOOLS == ("read", "bash", "edit", "write", "grep", "find", "ls")
    assert hashlib.sha256(sent.encode()).hexdigest() == SPECS_SHA256


def test_every_declared_tool_has_an_implementation():
    # A definition without an implementation would reach the model, then fail as "not available".
    assert list(TOOL_IMPLEMENTATIONS) == list(TOOL_DEFINITIONS) == [*ALL_TOOLS, *FRONT_END_TOOLS]


def test_declared_effects_decide_retries():
    assert {name: tool_effect(name) for name in ALL_TOOLS} == {
        "read": "reads", "grep": "reads", "find": "reads", "ls": "reads",
        "write": "writes", "edit": "writes", "bash": "executes",
    }  # fmt: skip
    assert {name: TOOL_DEFINITIONS[name].path_argument for name in ("write", "edit")} == {
        "write": "path",
        "edit": "path",
    }
    # The workflow runs task itself, and a made-up name is never retried.
    assert tool_effect("task") == tool_effect("no_such_tool") == "executes"


def test_a_write_must_name_its_path_argument():
    spec = ToolSpec(name="touch", description="", parameters=object_schema({"path": string("")}, ["path"]))
    with pytest.raises(ValidationError, match="path_argument"):
        ToolDefinition(spec=spec, effect="writes")
    with pytest.raises(ValidationError, match="not a parameter"):
        ToolDefinition(spec=spec, effect="writes", path_argument="file")
    with pytest.raises(ValidationError, match="path_argument"):
        ToolDefinition(spec=spec, effect="reads", path_argument="path")


def test_read_only_and_mutated_paths():
    assert [name for name in ALL_TOOLS if is_read_only(name)] == ["read", "grep", "find", "ls"]
    assert not is_read_only("task") and not is_read_only("no_such_tool")
    assert mutated_path("write", {"path": " @./a//b.txt "}) == "a/b.txt"
    assert mutated_path("bash", {"path": "a"}) is None and mutated_path("task", {"path": "a"}) is None
    assert mutated_path("edit", {"path": "./src/../src/a.py", "edits": []}) == "src/a.py"
    assert mutated_path("write", {"path": "/tmp/x"}) == "/tmp/x"
    assert mutated_path("read", {"path": "a"}) is None
    assert mutated_path("write", {"path": 3}) is None and mutated_path("edit", "junk") is None


@pytest.mark.parametrize(
    ("tool", "args", "complaint"),
    [
        ("read", {}, "path: required but missing"),
        ("read", {"path": 7}, "path: must be a string, got a number"),
        ("read", {"path": "a.txt", "offset": "ten"}, "offset: must be a number"),
        ("read", {"path": "a.txt", "offset": 2.5}, "offset: must be a whole number"),
        ("read", {"path": "a.txt", "limit": 0}, "limit: must be at least 1"),
        ("bash", {"command": ["ls"]}, "command: must be a string, got an array"),
        ("bash", {"command": "ls", "timeout": "soon"}, "timeout: must be a number"),
        ("edit", {"path": "a.txt"}, "edits: required but missing"),
        ("edit", {"path": "a.txt", "edits": "nonsense"}, "edits: must be an array"),
        ("edit", {"path": "a.txt", "edits": [{"oldText": "a"}]}, "edits[0].newText: required but missing"),
        ("edit", {"path": "a.txt", "edits": ["a"]}, "edits[0]: must be an object"),
        ("write", {"content": "x"}, "path: required but missing"),
        ("grep", {"pattern": "x", "ignoreCase": "maybe"}, "ignoreCase: must be true or false"),
        ("grep", {"pattern": "x", "context": -1}, "context: must be at least 0"),
        ("find", {"pattern": "*", "limit": -5}, "limit: must be at least 1"),
        ("ls", {"limit": 2.5}, "limit: must be a whole number"),
        ("ls", "not an object", "arguments: must be an object"),
    ],
)
async def test_invalid_arguments_are_error_results_naming_the_field(
    tmp_path: Path, tool: str, args: Any, complaint: str
):
    (tmp_path / "a.txt").write_text("a\n")
    outcome = await execute_tool(tool, args, ToolContext(cwd=str(tmp_path)))
    assert outcome.is_error
    assert complaint in _text(outcome)
    assert f'tool "{tool}"' in _text(outcome)
    assert (tmp_path / "a.txt").read_text() == "a\n"


async def test_almost_right_arguments_are_coerced(tmp_path: Path):
    (tmp_path / "a.txt").write_text("1\n2\n3\n")
    outcome = await execute_tool(
        "read", {"path": "a.txt", "offset": "2", "limit": 1.0}, ToolContext(cwd=str(tmp_path))
    )
    assert not outcome.is_error and _text(outcome).startswith("2\n")
    found = await execute_tool(
        "grep", {"pattern": "1", "literal": "true", "path": None}, ToolContext(cwd=str(tmp_path))
    )
    assert _text(found) == "a.txt:1: 1"


async def test_unknown_and_disabled_tools(tmp_path: Path):
    unknown = await execute_tool("no_such_tool", {"a": 1}, ToolContext(cwd=str(tmp_path)))
    assert unknown.is_error and "no_such_tool" in _text(unknown) and "read, bash" in _text(unknown)
    disabled = await execute_tool("ls", {}, ToolContext(cwd=str(tmp_path), enabled_tools=DEFAULT_TOOLS))
    assert disabled.is_error and '"ls" is not available' in _text(disabled)
    assert "read, bash, edit, write." in _text(disabled)
