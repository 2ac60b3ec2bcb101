"""What the session says when something did not run as asked, and the messages carrying it."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from tempi.agent.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage
    from tempi.agent.model_spec import ModelSpec

ABORTED_TEXT = "Aborted by the user."
SKIPPED_TEXT = "Not run: a user message was queued, so the remaining tool calls were skipped."
OVERFLOW_RECOVERY_FAILED = (
    "The context is still too large after compacting once, so the request was not retried. "
    "Start a new session, compact with a focus (/compact ...), or switch to a model with a larger context window."
)
LOST_BASH_TEXT = (
    "The worker running this command stopped before it reported back, so the command may or "
    "may not have completed. Check the workspace state before running it again."
)


def sandbox_host_gone(pickup_s: float) -> str:
    return (
        f"The sandbox's host did not pick this up within {pickup_s:g} s, so its worker is probably "
        "gone. A fresh sandbox starts with the next tool call, from the workspace as last saved."
    )


def synthetic_result(call: ToolCall, text: str, now_ms: int) -> ToolResultMessage:
    """An error result for a call that did not run (or did not report back)."""
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=[TextContent(text=text)],
        details={},
        is_error=True,
        timestamp=now_ms,
    )


def aborted_message(model: ModelSpec, now_ms: int) -> AssistantMessage:
    return AssistantMessage(
        content=[],
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason="aborted",
        error_message=ABORTED_TEXT,
        timestamp=now_ms,
    )


def error_message(model: ModelSpec, text: str, now_ms: int) -> AssistantMessage:
    message = aborted_message(model, now_ms)
    message.stop_reason = "error"
    message.error_message = text
    return message


def tool_output(msg: ToolResultMessage) -> dict[str, Any]:
    """A result as tool_execution_end shows it (pi's AgentToolResult)."""
    out: dict[str, Any] = {"content": [b.to_json_dict() for b in msg.content]}
    if msg.details is not None and msg.details != {}:
        out["details"] = msg.details
    return out
