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


def sandbox_host_gone(pickup_s: float, container: str | None = None) -> str:
    """A tool call no sandbox worker took; `container` names the user's own container
    (`--sandbox container:NAME`), which tempi never replaces with a fresh one."""
    if container is not None:
        return (
            f"The worker serving the container {container} did not pick this up within {pickup_s:g} s, "
            f"so it is probably gone. The next tool call looks {container} up again: check that it "
            f"still runs (`docker ps --filter name={container}`) and that a tempi worker runs on its host."
        )
    return (
        f"The sandbox's host did not pick this up within {pickup_s:g} s, so its worker is probably "
        "gone. A fresh sandbox starts with the next tool call, from the workspace as last saved."
    )


def sandbox_unavailable(reason: str, container: str | None = None) -> str:
    """Why no tool or `!cmd` could run: the docker sandbox did not start, or the user's own
    container (`--sandbox container:NAME`) could not be used."""
    if container is None:
        return f"Could not start the docker sandbox: {reason}"
    text = f"Cannot run in the container {container}: {reason}"
    if "`docker " not in reason:  # the lookup's own reasons already say which command fixes them
        text += f" (check that it runs: `docker ps --filter name={container}`)"
    return text


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
    """A result as tool_execution_end shows it (pi's AgentToolResult): an error's carries
    its (empty) details object, as pi's does."""
    out: dict[str, Any] = {"content": [b.to_json_dict() for b in msg.content]}
    if msg.details is not None and (msg.details != {} or msg.is_error):
        out["details"] = msg.details
    return out
