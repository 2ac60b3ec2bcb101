"""From the agent's conversation to what a provider is sent.

The agent keeps roles a model API does not know (user shell commands, extension
messages, branch and compaction summaries); each becomes a user message here.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence

from tempi.agent.messages import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    LlmMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
)

COMPACTION_PREAMBLE = (
    "Earlier messages of this conversation were compacted to save space. "
    "This summary stands in for them:\n\n<summary>\n"
)
BRANCH_PREAMBLE = (
    "The user went back to an earlier point of this conversation and left another branch. "
    "This summarizes what happened on that branch:\n\n<summary>\n"
)
SUMMARY_END = "\n</summary>"


def bash_execution_text(message: BashExecutionMessage) -> str:
    """How a command the user ran themselves is reported to the model."""
    parts = [f"The user ran a shell command: `{message.command}`"]
    parts.append(f"```\n{message.output.rstrip(chr(10))}\n```" if message.output else "(no output)")
    if message.cancelled:
        parts.append("The command was cancelled before it finished.")
    elif message.exit_code is not None:
        parts.append(f"Exit code: {message.exit_code}")
    if message.truncated and message.full_output_path:
        parts.append(f"The output was truncated; the full output is in {message.full_output_path}")
    return "\n".join(parts)


def _user_text(text: str, timestamp: int) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=timestamp)


def to_llm_message(message: AgentMessage) -> LlmMessage | None:
    """The provider-facing form of one message, or None when it stays out of context."""
    if isinstance(message, UserMessage | AssistantMessage | ToolResultMessage):
        return message
    if isinstance(message, BashExecutionMessage):
        if message.exclude_from_context:
            return None
        return _user_text(bash_execution_text(message), message.timestamp)
    if isinstance(message, CustomMessage):
        if isinstance(message.content, str):
            return _user_text(message.content, message.timestamp)
        return UserMessage(content=message.content, timestamp=message.timestamp)
    if isinstance(message, BranchSummaryMessage):
        return _user_text(BRANCH_PREAMBLE + message.summary + SUMMARY_END, message.timestamp)
    if isinstance(message, CompactionSummaryMessage):
        return _user_text(COMPACTION_PREAMBLE + message.summary + SUMMARY_END, message.timestamp)
    return None


def to_llm_messages(messages: Iterable[AgentMessage]) -> list[LlmMessage]:
    converted = (to_llm_message(message) for message in messages)
    return [message for message in converted if message is not None]


class GrowingConversion:
    """`to_llm_messages` for one conversation as it grows: when the messages begin with the
    very objects converted last time, only the ones after them are converted."""

    def __init__(self) -> None:
        self._seen: list[AgentMessage] = []
        self._converted: list[LlmMessage] = []

    def convert(self, messages: Sequence[AgentMessage]) -> list[LlmMessage]:
        done = len(self._seen)
        if len(messages) >= done and all(map(operator.is_, messages[:done], self._seen)):
            converted = [*self._converted, *to_llm_messages(messages[done:])]
        else:
            converted = to_llm_messages(messages)
        self._seen = list(messages)
        self._converted = converted
        return list(converted)
