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
