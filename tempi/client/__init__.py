"""The session API every front end uses: start, find and drive tempi sessions from Python.

service = SessionService(client, SessionStore(default_sessions_root()))
session = await service.start(SessionOptions(cwd=".", model=model))
await session.prompt("hello")
async for event in session.events(until_idle=True): ...
"""

from tempi.client.errors import SessionError, SessionMismatch, SessionNotFound, SessionRefused
from tempi.client.events import EventFollower
from tempi.client.options import FindModel, SessionOptions
from tempi.client.service import SessionService
from tempi.client.session import SessionClient

__all__ = [
    "EventFollower",
    "FindModel",
    "SessionClient",
    "SessionError",
    "SessionMismatch",
    "SessionNotFound",
    "SessionOptions",
    "SessionRefused",
    "SessionService",
]
