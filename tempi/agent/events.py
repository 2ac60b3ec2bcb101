"""Agent events in pi's vocabulary: what `--mode json` prints and RPC clients receive."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from tempi.agent.base import PiModel
from tempi.agent.messages import AgentMessage, ToolResultMessage, UserBlock
from tempi.agent.stream_events import AssistantMessageEvent


class ToolOutput(PiModel):
    """What a tool returns (pi's `AgentToolResult`): content for the model, details for UIs."""

    content: list[UserBlock] = Field(default_factory=list)
    details: Any = None


class AgentStart(PiModel):
    type: Literal["agent_start"] = "agent_start"


class AgentEnd(PiModel):
    type: Literal["agent_end"] = "agent_end"
    messages: list[AgentMessage]


class TurnStart(PiModel):
    type: Literal["turn_start"] = "turn_start"


class TurnEnd(PiModel):
    type: Literal["turn_end"] = "turn_end"
    message: AgentMessage
    tool_results: list[ToolResultMessage]


class MessageStart(PiModel):
    type: Literal["message_start"] = "message_start"
    message: AgentMessage


class MessageUpdate(PiModel):
    type: Literal["message_update"] = "message_update"
    assistant_message_event: AssistantMessageEvent
    message: AgentMessage


class MessageEnd(PiModel):
    type: Literal["message_end"] = "message_end"
    message: AgentMessage


class ToolExecutionStart(PiModel):
    type: Literal["tool_execution_start"] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: Any


class ToolExecutionUpdate(PiModel):
    type: Literal["tool_execution_update"] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: ToolOutput


class ToolExecutionEnd(PiModel):
    type: Literal["tool_execution_end"] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: ToolOutput
    is_error: bool


class QueueUpdate(PiModel):
    type: Literal["queue_update"] = "queue_update"
    steering: list[str]
    follow_up: list[str]


CompactionReason = Literal["manual", "threshold", "overflow"]


class CompactionStart(PiModel):
    type: Literal["compaction_start"] = "compaction_start"
    reason: CompactionReason


class CompactionEnd(PiModel):
    type: Literal["compaction_end"] = "compaction_end"
    reason: CompactionReason
    result: Any = None
    aborted: bool | None = None
    will_retry: bool | None = None
    error_message: str | None = None


class AutoRetryStart(PiModel):
    type: Literal["auto_retry_start"] = "auto_retry_start"
    attempt: int
    max_attempts: int
    delay_ms: int
    error_message: str


class AutoRetryEnd(PiModel):
    type: Literal["auto_retry_end"] = "auto_retry_end"
    success: bool
    attempt: int
    final_error: str | None = None


class SessionInfoChanged(PiModel):
    type: Literal["session_info_changed"] = "session_info_changed"
    name: str


AgentEvent = Annotated[
    AgentStart
    | AgentEnd
    | TurnStart
    | TurnEnd
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
    | QueueUpdate
    | CompactionStart
    | CompactionEnd
    | AutoRetryStart
    | AutoRetryEnd
    | SessionInfoChanged,
    Field(discriminator="type"),
]

agent_event_adapter: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)


def parse_event(data: dict[str, Any]) -> AgentEvent:
    return agent_event_adapter.validate_python(data)
