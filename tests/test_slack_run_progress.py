"""How a session's retries and compactions end (or do not end) a Slack run: the paths the
end-to-end tests in test_slack_notices.py do not reach, on the session's own event shapes."""

from __future__ import annotations

from typing import Any

from tempi.activities.slack.run_progress import summarize


def failed(message: str) -> list[dict[str, Any]]:
    answer = {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": message}
    return [{"type": "message_end", "message": answer}, {"type": "agent_end"}]


def test_a_stop_during_the_wait_before_a_retry_ends_the_run_as_stopped() -> None:
    events = [
        *failed("503 overloaded"),
        {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 2000},
        {"type": "auto_retry_end", "success": False, "attempt": 1, "finalError": "Retry cancelled"},
    ]
    progress = summarize(events, len(events), {})
    assert progress.done and progress.aborted
    assert [c.text for c in progress.copies] == ["_Retrying (1/3)..._"]


def test_retries_given_up_end_the_run_with_the_last_error() -> None:
    events = [
        {"type": "auto_retry_start", "attempt": 3, "maxAttempts": 3, "delayMs": 8000},
        {"type": "agent_start"},
        *failed("503 still overloaded"),
        {"type": "auto_retry_end", "success": False, "attempt": 3, "finalError": "503 still overloaded"},
    ]
    progress = summarize(events, len(events), {})
    assert progress.done and not progress.aborted
    assert progress.error == "503 still overloaded"


def test_an_overflow_compacted_and_asked_again_is_not_the_end() -> None:
    first = [*failed("prompt is too long"), {"type": "compaction_start", "reason": "overflow"}]
    progress = summarize(first, len(first), {})
    assert not progress.done
    assert [c.text for c in progress.copies] == ["_Compacting context..._"]
    then = [{"type": "compaction_end", "reason": "overflow", "willRetry": True}, {"type": "agent_start"}]
    assert not summarize(then, len(first) + len(then), {}).done


def test_an_overflow_that_compaction_cannot_fix_ends_the_run_with_its_error() -> None:
    events = [{"type": "compaction_end", "reason": "overflow", "willRetry": False, "errorMessage": "too big"}]
    progress = summarize(events, 1, {})
    assert progress.done and progress.error == "too big"


def tool_turn(call_id: str, text: str) -> dict[str, Any]:
    content = [{"type": "text", "text": text}, {"type": "toolCall", "id": call_id, "name": "bash"}]
    return {
        "type": "message_end",
        "message": {"role": "assistant", "content": content, "stopReason": "toolUse"},
    }


def tool_run(call_id: str, command: str, result: str, *, error: bool, began_ms: int) -> list[dict[str, Any]]:
    args = {"command": command, "label": f"run {command}"}
    out = {"content": [{"type": "text", "text": result}]}
    result_message = {"role": "toolResult", "toolCallId": call_id, "timestamp": began_ms, "content": []}
    return [
        {"type": "tool_execution_start", "toolCallId": call_id, "toolName": "bash", "args": args},
        {
            "type": "tool_execution_end",
            "toolCallId": call_id,
            "toolName": "bash",
            "result": out,
            "isError": error,
        },
        {"type": "message_start", "message": result_message},
        {"type": "message_end", "message": result_message},
    ]


def test_main_message_lines_come_in_the_order_they_happened_with_tool_errors_echoed() -> None:
    events = [
        tool_turn("c1", "First I look."),
        *tool_run("c1", "ls /nope", "ls: cannot access '/nope':\nNo such file", error=True, began_ms=1_000),
        tool_turn("c2", "Then I count."),
        *tool_run("c2", "wc -l x", "3 x", error=False, began_ms=5_000),
    ]
    progress = summarize(events, len(events), {})
    assert progress.lines == [
        "First I look.",
        "_→ run ls /nope_",
        "_Error: ls: cannot access '/nope': No such file_",
        "Then I count.",
        "_→ run wc -l x_",
    ]


def test_a_tools_time_runs_from_its_start_in_the_session_to_when_its_end_was_seen() -> None:
    events = tool_run("c1", "sleep 1.5", "", error=False, began_ms=1_700_000_000_000)
    seen = [1_700_000_000.2, 1_700_000_001.6, 1_700_000_001.9, 1_700_000_001.9]
    (ended,) = summarize(events, len(events), {}, seen).ended
    assert ended.seconds is not None and abs(ended.seconds - 1.6) < 1e-6
    # Without the times the workflow falls back to its own clock.
    assert summarize(events, len(events), {}).ended[0].seconds is None


def test_a_started_tool_carries_its_arguments_for_the_workflow_to_keep() -> None:
    events = tool_run("c1", "sleep 3; echo late", "late", error=False, began_ms=0)[:1]
    (started,) = summarize(events, 1, {}).started
    assert (started.label, started.args) == ("run sleep 3; echo late", "sleep 3; echo late")
