"""Failures a tool reports to the model instead of raising."""

from __future__ import annotations

import errno


class ToolError(Exception):
    """A tool call that cannot be carried out; the message is written for the model."""


def describe_os_error(error: OSError, display_path: str) -> str:
    """A short message for a filesystem error, naming the path as the model gave it."""
    if isinstance(error, FileNotFoundError):
        return f"File not found: {display_path}"
    if isinstance(error, PermissionError):
        return f"Permission denied: {display_path}"
    if isinstance(error, IsADirectoryError):
        return f"{display_path} is a directory, not a file (use ls to list it)"
    if isinstance(error, NotADirectoryError):
        return f"A parent of {display_path} is not a directory"
    if error.errno == errno.ENOSPC:
        return f"No space left on device while writing {display_path}"
    reason = error.strerror or str(error)
    return f"{reason}: {display_path}"
