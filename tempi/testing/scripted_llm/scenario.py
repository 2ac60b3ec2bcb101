"""What a scripted model answers: turns, how a request picks its turn, the summary text.

A scenario file is either a JSON list of turns (pi's recorded format, turns picked by the
number of assistant messages in the request) or an object
`{"turns": [...], "select": "assistant_count" | "sequential", "summary": "...", "routes": {...}}`.
`routes` maps a text to a scenario of its own: a request whose messages mention the text
(a file name, say) is answered from that scenario, the first match in order, so sessions
working on different files at once each follow their own script.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

DEFAULT_SUMMARY = """## Goal
Continue the scripted task.

## Constraints & Preferences
- (none)

## Progress
### Done
- [x] Earlier scripted turns

### In Progress
- [ ] The current scripted turn

### Blocked
- (none)

## Key Decisions
- **Scripted summary**: produced by the scripted LLM server

## Next Steps
1. Carry on with the next scripted turn

## Critical Context
- (none)"""


class ScenarioError(ValueError):
    """A scenario that cannot be used, with the reason and where it came from."""


class _Strict(BaseModel):
    # Unknown keys are refused so a typo in a scenario fails loudly instead of being ignored.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ScriptedToolCall(_Strict):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ScriptedUsage(_Strict):
    """Token counts in pi's vocabulary; each wire encoder maps them to its provider's fields."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)

    input: int = Field(default=100, ge=0)
    output: int = Field(default=20, ge=0)
    cache_read: int = Field(default=0, ge=0)
    cache_write: int = Field(default=0, ge=0)


class ScriptedTurn(_Strict):
    text: str | None = None
    thinking: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    overflow: bool = False
    fail_times: int = Field(default=0, ge=0)
    fail_status: int = Field(default=500, ge=400, le=599)
    retry_after: float | None = Field(default=None, ge=0)
    usage: ScriptedUsage = Field(default_factory=ScriptedUsage)
    stop_reason: Literal["stop", "length"] | None = None
    chunk_size: int = Field(default=8, ge=1)
    chunk_delay_ms: float = Field(default=0, ge=0)
    first_chunk_delay_ms: float = Field(default=0, ge=0)
    drop_after_chunks: int | None = Field(default=None, ge=0)
    drop_times: int = Field(default=1, ge=0)
    # bedrock-converse-stream: end the stream with this exception frame (e.g.
    # "modelStreamErrorException") instead of messageStop.
    stream_exception: str | None = None

    def ends_with_tool_use(self) -> bool:
        return bool(self.tool_calls) and self.stop_reason != "length"


TurnSelection = Literal["assistant_count", "sequential"]


class Scenario(_Strict):
    turns: list[ScriptedTurn] = Field(default_factory=list)
    select: TurnSelection = "assistant_count"
    summary: str = DEFAULT_SUMMARY
    routes: dict[str, Scenario] = Field(default_factory=dict)

    def route_for(self, messages_json: str) -> str | None:
        return next((key for key in self.routes if key in messages_json), None)


def coerce_scenario(value: Scenario | list[Any] | dict[str, Any], origin: str = "scenario") -> Scenario:
    """Accept a Scenario, pi's list-of-turns form or the object form."""
    if isinstance(value, Scenario):
        return value
    try:
        if isinstance(value, list):
            return Scenario(turns=[ScriptedTurn.model_validate(turn) for turn in value])
        if isinstance(value, dict):
            return Scenario.model_validate(value)
    except ValidationError as err:
        raise ScenarioError(f"{origin}: invalid scenario: {err}") from err
    raise ScenarioError(
        f"{origin}: a scenario is a list of turns or an object with 'turns', got {type(value).__name__}"
    )


def load_scenario_file(path: Path) -> Scenario:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ScenarioError(f"{path}: cannot read: {err}") from err
    except json.JSONDecodeError as err:
        raise ScenarioError(f"{path}: not valid JSON: {err}") from err
    return coerce_scenario(raw, origin=str(path))


def load_scenarios(path: Path) -> dict[str, Scenario]:
    """Every `*.json` in a directory (or one file), each named after its file stem."""
    if path.is_file():
        return {path.stem: load_scenario_file(path)}
    if path.is_dir():
        return {file.stem: load_scenario_file(file) for file in sorted(path.glob("*.json"))}
    raise ScenarioError(f"{path}: no such scenario file or directory")
