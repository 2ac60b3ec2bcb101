"""The largest answer a model call may return.

The answer crosses Temporal as the model call's result, under its 2 MB payload limit; one
over this fails for good (no retry could shrink it), and its stream is closed as soon as its
text and thinking alone are over. Tool arguments have their own 1 MB bound (invalid_call).
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

ANSWER_TOO_LARGE = "AnswerTooLarge"
MAX_ANSWER_BYTES = 1_500_000


def check_answer_size(size: int) -> None:
    """Raises a non-retryable ApplicationError when `size` bytes are over the bound."""
    if size > MAX_ANSWER_BYTES:
        raise ApplicationError(
            f"The model's answer was over {MAX_ANSWER_BYTES / 1_000_000:g} MB, more than one answer "
            f"may carry ({size / 1_000_000:.1f} MB so far), so it was dropped and not retried. "
            "Ask for a shorter answer, or for long output to be written to files in parts.",
            type=ANSWER_TOO_LARGE,
            non_retryable=True,
        )
