"""What the session API raises, so front ends need not know temporalio's error types."""

from __future__ import annotations


class SessionError(RuntimeError):
    """A session operation failed; the message is meant for the user."""


class SessionRefused(SessionError):
    """The workflow rejected an update (a prompt, bash, compact or navigate request);
    the message is the workflow's own reason."""


class SessionNotFound(SessionError):
    """No running session matches the reference."""
