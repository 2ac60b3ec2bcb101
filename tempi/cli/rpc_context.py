"""The contract between the RPC server and its commands: each command takes the server
and the command object and returns the response's data (NO_DATA for none) or raises
RpcError with the message to send."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from tempi.cli.plan import PlannedRun
from tempi.cli.session_choice import OpenSession
from tempi.client import SessionClient, SessionService


class RpcContext(Protocol):
    """What the commands need of the server that runs them."""

    planned: PlannedRun
    service: SessionService
    cwd: Path
    opened: OpenSession | None
    # Held while events are written: a response goes out before or after them under it.
    gate: asyncio.Lock

    @property
    def session(self) -> SessionClient: ...

    def respond(self, command_id: Any, command: str, data: Any = ..., error: str | None = None) -> None: ...

    def write_event(self, event: dict[str, Any]) -> None: ...

    async def use_session(self, opened: OpenSession) -> None: ...

    async def events_until(self, wanted: Callable[[dict[str, Any]], bool], timeout_s: float) -> bool: ...


NO_DATA: Any = object()
# The handler wrote its response itself.
ALREADY_SENT: Any = object()


class RpcError(Exception):
    """The command failed; the message is the response's `error`."""


Handler = Callable[[RpcContext, dict[str, Any]], Awaitable[Any]]


def text_arg(command: dict[str, Any], key: str) -> str:
    value = command.get(key)
    if not isinstance(value, str):
        raise RpcError(f'"{key}" must be a string')
    return value
