"""What the session store raises to its callers (the CLI shows these messages as they are)."""

from __future__ import annotations


class SessionFileError(Exception):
    """A session file is missing, unreadable or not a session file."""


class ForeignSessionFileError(SessionFileError):
    """A session file belongs to another user: tempi does not write to it."""


class SessionNotFoundError(SessionFileError):
    pass


class AmbiguousSessionError(SessionFileError):
    pass
