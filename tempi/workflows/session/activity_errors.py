"""Reading why an activity or child failed, from the error chain Temporal hands back."""

from __future__ import annotations

from temporalio.exceptions import ApplicationError, TimeoutType
from temporalio.exceptions import TimeoutError as TemporalTimeoutError


def cause(err: BaseException) -> str:
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err) or type(err).__name__


def is_disk_full(err: BaseException) -> bool:
    """An activity's DiskFull: the cause of the ActivityError a regular activity fails with,
    or the error itself, as a local activity's failure reaches the workflow."""
    return any(isinstance(e, ApplicationError) and e.type == "DiskFull" for e in (err, err.__cause__))


def never_started(err: BaseException) -> bool:
    inner = err.__cause__
    return isinstance(inner, TemporalTimeoutError) and inner.type == TimeoutType.SCHEDULE_TO_START
