"""Failures of the sandbox itself, as opposed to failures of what runs inside it."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker.errors


class SandboxError(Exception):
    """A sandbox could not be created or used; the message says why, for a person."""


class SandboxUnavailableError(SandboxError):
    """The sandbox's container is gone, stopped, or its Docker engine is unreachable."""


def _explanation(error: docker.errors.APIError) -> str:
    return str(error.explanation or error)


def _is_missing_container(error: docker.errors.APIError) -> bool:
    # An exec instance disappears with its container.
    text = _explanation(error).lower()
    return error.status_code == 404 and ("no such container" in text or "no such exec" in text)


@contextmanager
def engine_errors(container_id: str) -> Iterator[None]:
    """Turn the Docker failures that mean "the sandbox is not there" into SandboxUnavailableError."""
    # Imported here: a worker imports this module at start, and only sandbox work needs the
    # Docker SDK (a tenth of a second of every cold start).
    import docker.errors
    import requests.exceptions

    short = container_id[:12]
    try:
        yield
    except docker.errors.APIError as error:
        text = _explanation(error)
        if _is_missing_container(error):
            raise SandboxUnavailableError(f"The sandbox container {short} no longer exists") from None
        if error.status_code == 409 and ("not running" in text or "paused" in text):
            raise SandboxUnavailableError(f"The sandbox container {short} is not running") from None
        raise
    except requests.exceptions.ConnectionError as error:
        raise SandboxUnavailableError(
            f"The Docker engine of sandbox {short} cannot be reached: {error}"
        ) from None


def archive_os_error(status_code: int, message: str, path: str) -> OSError:
    """The OSError matching a failed archive request on `path`."""
    lowered = message.lower()
    if status_code == 404 or "no such file" in lowered:
        return FileNotFoundError(errno.ENOENT, "No such file or directory", path)
    if "not a directory" in lowered:
        return NotADirectoryError(errno.ENOTDIR, "Not a directory", path)
    if "read-only" in lowered:
        return OSError(errno.EROFS, "Read-only file system", path)
    if "permission denied" in lowered:
        return PermissionError(errno.EACCES, "Permission denied", path)
    return OSError(errno.EIO, message or f"Docker archive request failed ({status_code})", path)
