"""What crosses workflow history about extensions: their paths, the tools they register
(name, schema, effect), load problems, and what a hook decided. No code, no I/O."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tempi.agent.base import PiModel
from tempi.agent.llm_context import ToolSpec
from tempi.agent.messages import UserBlock
from tempi.agent.tools.definition import ToolEffect

# What an extension declares about a tool it registers.
DeclaredEffect = Literal["read", "write", "execute", "idempotent"]


class ExtensionTool(PiModel):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    declared_effect: DeclaredEffect = "execute"
    extension: str  # the path of the extension that registered it

    @property
    def effect(self) -> ToolEffect:
        """Reads and idempotent calls may run again after a lost worker; a write or a
        command of code tempi did not write may not be safe to repeat, so it runs once."""
        return "reads" if self.declared_effect in ("read", "idempotent") else "executes"

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


class ExtensionCommand(PiModel):
    name: str
    description: str = ""
    extension: str


class ExtensionProblem(PiModel):
    extension: str
    error: str
    event: str = ""  # the event whose handler failed, when the reporter does not know it


class ExtensionSetup(PiModel):
    """What the session's extensions registered, as loaded on a worker when the session
    started, and the ones that failed to load."""

    tools: list[ExtensionTool] = Field(default_factory=list)
    commands: list[ExtensionCommand] = Field(default_factory=list)
    problems: list[ExtensionProblem] = Field(default_factory=list)
    # What session_start handlers asked of the session, and how they failed: reported and
    # applied once, then dropped (a failing handler does not unload its extension).
    effects: ExtensionEffects | None = None
    start_problems: list[ExtensionProblem] = Field(default_factory=list)
    # The events the extensions have handlers for: a run ends without the agent_end
    # activity when none observes turn_end or agent_end.
    events: list[str] = Field(default_factory=list)

    def find(self, name: str) -> ExtensionTool | None:
        return next((t for t in self.tools if t.name == name), None)


class CustomEntry(PiModel):
    """pi's `custom` session entry an extension appended: its state, kept in the file."""

    custom_type: str
    data: Any = None


class ExtensionMessage(PiModel):
    """A user message an extension sent into the session."""

    text: str
    deliver_as: Literal["steer", "follow_up"] = "steer"


class ExtensionEffects(PiModel):
    """What extension code asked of the session while it ran in an activity; the workflow
    applies it once the activity's result is in history."""

    custom_entries: list[CustomEntry] = Field(default_factory=list)
    messages: list[ExtensionMessage] = Field(default_factory=list)

    def empty(self) -> bool:
        return not self.custom_entries and not self.messages


class InjectedMessage(PiModel):
    """A message a before_agent_start handler puts into the conversation after the run's
    prompt (pi's `custom` message): a `custom_message` entry, sent to the model as the user's."""

    custom_type: str
    content: str | list[UserBlock]
    display: bool = True
    details: Any = None
