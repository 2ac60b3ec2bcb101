"""Reading why an activity or child failed, from the error chain Temporal hands back."""

from __future__ import annotations

from temporalio.exceptions import ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

from tempi.agent.tools.definition import ToolEffect


def cause(err: BaseException) -> str:
    """The innermost error's text; a full disk's own words (what to do about it), not the
    bare OSError beneath them."""
    while not _disk_full(err) and err.__cause__ is not None:
        err = err.__cause__
    if isinstance(err, ApplicationError) and _disk_full(err):
        return err.message
    return str(err) or type(err).__name__


def _disk_full(err: BaseException | None) -> bool:
    return isinstance(err, ApplicationError) and err.type == "DiskFull"


def is_disk_full(err: BaseException) -> bool:
    """An activity's DiskFull: the cause of the ActivityError a regular activity fails with,
    or the error itself, as a local activity's failure reaches the workflow."""
    return _disk_full(err) or _disk_full(err.__cause__)


def tool_failure_text(err: BaseException, effect: ToolEffect, *, lost: str, failure: str) -> str:
    """What the model reads when a tool's activity failed: a full disk's own words, `lost`
    for a tool that may not run twice, else `failure` and the cause."""
    if is_disk_full(err):
        return cause(err)
    if effect == "executes":
        return lost
    return f"{failure}: {cause(err)}"


def never_started(err: BaseException) -> bool:
    inner = err.__cause__
    return isinstance(inner, TemporalTimeoutError) and inner.type == TimeoutType.SCHEDULE_TO_START
