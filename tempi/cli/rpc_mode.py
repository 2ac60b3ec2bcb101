"""`tempi --mode rpc`: pi's RPC protocol on stdin/stdout, driving one session at a time.

Commands are handled in arrival order; the slow ones (bash, compact, abort) run beside
the rest so that, for example, abort_bash can reach a running bash. Events of the current
session stream out as the workflow logs them. The session outlives this process: a client
that goes away leaves its session running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio.service import RPCError

from tempi.cli.errors import UserError
from tempi.cli.plan import PlannedRun
from tempi.cli.rpc_commands import BACKGROUND, HANDLERS
from tempi.cli.rpc_context import ALREADY_SENT, NO_DATA, RpcError
from tempi.cli.rpc_io import ProtocolOut, parse_command, read_lines
from tempi.cli.session_choice import OpenSession
from tempi.client import EventFollower, SessionClient, SessionRefused, SessionService
from tempi.client.events import POLL_INTERVAL_S

EVENTS_PAGE = 1000


class RpcServer:
    def __init__(self, service: SessionService, planned: PlannedRun, out: ProtocolOut, cwd: Path) -> None:
        self.service = service
        self.planned = planned
        self.out = out
        self.cwd = cwd
        # Held while events are written, so a response can be ordered before the events
        # its command causes (prompt) or after the ones it waits for (set_session_name).
        self.gate = asyncio.Lock()
        self.opened: OpenSession | None = None
        self.follower: EventFollower | None = None
        self.pump_task: asyncio.Task[None] | None = None
        self.background: set[asyncio.Task[None]] = set()

    # --- the current session ----------------------------------------------------------

    @property
    def session(self) -> SessionClient:
        assert self.opened is not None
        return self.opened.session

    async def use_session(self, opened: OpenSession) -> None:
        """Make `opened` current; its events stream from now on."""
        if self.pump_task is not None:
            self.pump_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.pump_task
        follower = opened.session.follow()
        while (
            len(await follower.poll())
            and follower.last_page
            and len(follower.last_page.events) >= EVENTS_PAGE
        ):
            pass  # skip what happened before this client arrived
        previous = self.opened
        self.opened, self.follower = opened, follower
        self.pump_task = asyncio.create_task(self._pump())
        if previous is not None and previous is not opened:
            await previous.close()

    async def _pump(self) -> None:
        while True:
            try:
                async with self.gate:
                    written = await self._write_events()
            except RPCError:
                await asyncio.sleep(POLL_INTERVAL_S)  # the server is briefly unreachable: keep trying
                continue
            if not written:
                assert self.follower is not None
                await self.follower.wait_for_news()

    async def _write_events(self) -> int:
        assert self.follower is not None
        batch = await self.follower.poll()
        for event in batch:
            self.out.write(event)
        return len(batch)

    async def events_until(self, wanted: Callable[[dict[str, Any]], bool], timeout_s: float) -> bool:
        """Stream events until one matches `wanted` (True) or the time is up (False)."""
        assert self.follower is not None
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            async with self.gate:
                batch = await self.follower.poll()
                for event in batch:
                    self.out.write(event)
            if any(wanted(e) for e in batch):
                return True
            if asyncio.get_running_loop().time() >= deadline:
                return False
            if not batch:
                await self.follower.wait_for_news()

    # --- responses ----------------------------------------------------------------------

    def write_event(self, event: dict[str, Any]) -> None:
        """An event the front end itself makes (an extension's input handler that failed)."""
        self.out.write(event)

    def respond(self, command_id: Any, command: str, data: Any = NO_DATA, error: str | None = None) -> None:
        response: dict[str, Any] = {"type": "response", "command": command}
        if command_id is not None:
            response = {"id": command_id, **response}
        if error is not None:
            response.update(success=False, error=error)
        else:
            response["success"] = True
            if data is not NO_DATA:
                response["data"] = data
        self.out.write(response)

    async def handle_command(self, command: dict[str, Any]) -> None:
        name = command["type"]
        command_id = command.get("id")
        handler = HANDLERS.get(name)
        if handler is None:
            self.respond(command_id, name, error=f"Unknown command: {name}")
            return
        try:
            data = await handler(self, command)
        except RpcError as err:
            self.respond(command_id, name, error=str(err))
        except (SessionRefused, RPCError, UserError, OSError, ValueError) as err:
            self.respond(command_id, name, error=str(err) or type(err).__name__)
        else:
            if data is not ALREADY_SENT:
                self.respond(command_id, name, data)

    async def serve(self) -> None:
        async for line in read_lines(0):
            if isinstance(line, bytes) and not line.strip():
                continue
            command = parse_command(line)
            if isinstance(command, str):
                self.respond(None, "parse", error=command)
                continue
            if command["type"] in BACKGROUND:
                task = asyncio.create_task(self._guarded(command))
                self.background.add(task)
                task.add_done_callback(self.background.discard)
            else:
                await self._guarded(command)

    async def _guarded(self, command: dict[str, Any]) -> None:
        try:
            await self.handle_command(command)
        except Exception as err:  # the server keeps serving whatever a command does
            self.respond(command.get("id"), str(command.get("type")), error=f"Internal error: {err!r}")

    async def close(self) -> None:
        for task in [*self.background, *([self.pump_task] if self.pump_task else [])]:
            task.cancel()
        if self.opened is not None:
            await self.opened.close()


async def run_rpc(service: SessionService, planned: PlannedRun, first: OpenSession, out: ProtocolOut) -> int:
    server = RpcServer(service, planned, out, Path(os.getcwd()))
    await server.use_session(first)
    try:
        await server.serve()
    finally:
        await server.close()
    return 0
