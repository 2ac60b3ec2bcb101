"""What the session API raises, so front ends need not know temporalio's error types."""

from __future__ import annotations


class SessionError(RuntimeError):
    """A session operation failed; the message is meant for the user."""


class SessionRefused(SessionError):
    """The workflow rejected an update (a prompt, bash, compact or navigate request);
    the message is the workflow's own reason."""


class SessionNotFound(SessionError):
    """No running session matches the reference."""


class SessionMismatch(SessionError):
    """A running session cannot take on what the caller asked for (e.g. another sandbox);
    the message says how to get it."""
