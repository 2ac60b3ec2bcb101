"""Messages and content blocks in pi's `AgentMessage` shapes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from tempi.agent.base import PiModel

Api = Literal["anthropic-messages", "openai-completions", "openai-responses", "faux"]
StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]


class TextContent(PiModel):
    type: Literal["text"] = "text"
    text: str
    text_signature: str | None = None


class ThinkingContent(PiModel):
    type: Literal["thinking"] = "thinking"
    thinking: str
    thinking_signature: str | None = None
    # Anthropic's redacted thinking: opaque payload kept in thinking_signature.
    redacted: bool | None = None


class ImageContent(PiModel):
    type: Literal["image"] = "image"
    data: str  # base64
    mime_type: str


class ToolCall(PiModel):
    type: Literal["toolCall"] = "toolCall"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    thought_signature: str | None = None


AssistantBlock = Annotated[TextContent | ThinkingContent | ToolCall, Field(discriminator="type")]
UserBlock = Annotated[TextContent | ImageContent, Field(discriminator="type")]


class Cost(PiModel):
    input: float = 0
    output: float = 0
    cache_read: float = 0
    cache_write: float = 0
    total: float = 0


class Usage(PiModel):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: Cost = Field(default_factory=Cost)

    def add(self, other: Usage) -> Usage:
        return Usage(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            total_tokens=self.total_tokens + other.total_tokens,
            cost=Cost(
                input=self.cost.input + other.cost.input,
                output=self.cost.output + other.cost.output,
                cache_read=self.cost.cache_read + other.cost.cache_read,
                cache_write=self.cost.cache_write + other.cost.cache_write,
                total=self.cost.total + other.cost.total,
            ),
        )


class UserMessage(PiModel):
    role: Literal["user"] = "user"
    content: str | list[UserBlock]
    timestamp: int

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(b.text for b in self.content if isinstance(b, TextContent))


class AssistantMessage(PiModel):
    role: Literal["assistant"] = "assistant"
    content: list[AssistantBlock] = Field(default_factory=list)
    api: str
    provider: str
    model: str
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    timestamp: int
    response_id: str | None = None

    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextContent))

    def tool_calls(self) -> list[ToolCall]:
        return [b for b in self.content if isinstance(b, ToolCall)]


class ToolResultMessage(PiModel):
    role: Literal["toolResult"] = "toolResult"
    tool_call_id: str
    tool_name: str
    content: list[UserBlock] = Field(default_factory=list)
    details: Any = None
    is_error: bool = False
    timestamp: int

    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextContent))


class BashExecutionMessage(PiModel):
    """A user-run shell command (`!cmd`, RPC `bash`); reaches the model as a user message."""

    role: Literal["bashExecution"] = "bashExecution"
    command: str
    output: str
    exit_code: int | None = None
    cancelled: bool = False
    truncated: bool = False
    full_output_path: str | None = None
    timestamp: int
    exclude_from_context: bool | None = None


class CustomMessage(PiModel):
    role: Literal["custom"] = "custom"
    custom_type: str
    content: str | list[UserBlock]
    display: bool = True
    details: Any = None
    timestamp: int


class BranchSummaryMessage(PiModel):
    role: Literal["branchSummary"] = "branchSummary"
    summary: str
    from_id: str
    timestamp: int


class CompactionSummaryMessage(PiModel):
    role: Literal["compactionSummary"] = "compactionSummary"
    summary: str
    tokens_before: int
    timestamp: int


AgentMessage = Annotated[
    UserMessage
    | AssistantMessage
    | ToolResultMessage
    | BashExecutionMessage
    | CustomMessage
    | BranchSummaryMessage
    | CompactionSummaryMessage,
    Field(discriminator="role"),
]
"""Anything that can sit in the agent's conversation."""

LlmMessage = UserMessage | AssistantMessage | ToolResultMessage
"""What the provider layer sends: custom roles are converted to user messages first."""

agent_message_adapter: TypeAdapter[AgentMessage] = TypeAdapter(AgentMessage)


def parse_message(data: dict[str, Any]) -> AgentMessage:
    return agent_message_adapter.validate_python(data)


def dump_message(message: PiModel) -> dict[str, Any]:
    return message.to_json_dict()
