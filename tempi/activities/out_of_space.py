"""A full disk ends the activity at once instead of being retried."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

from temporalio.exceptions import ApplicationError

DISK_FULL = "DiskFull"


@contextlib.contextmanager
def out_of_space_is_final(path: str) -> Iterator[None]:
    """A full disk will not heal by retrying in a second: fail at once, with what to do."""
    try:
        yield
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
        raise ApplicationError(
            f"No space left on the device holding {path}, so the session could not be saved. "
            "Free some space and send the prompt again: the session keeps its place.",
            type=DISK_FULL,
            non_retryable=True,
        ) from err
