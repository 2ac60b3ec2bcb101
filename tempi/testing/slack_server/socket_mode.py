"""Socket Mode: hello, events_api envelopes spread over open connections, acks, redelivery."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

logger = logging.getLogger("tempi.testing.slack_server")

# Slack retries an unacknowledged event three times.
MAX_RETRIES = 3


@dataclass
class Delivery:
    """One envelope sent: which event, which attempt, on which connection, acked or not."""

    envelope_id: str
    event_id: str
    event_type: str
    retry_attempt: int
    connection: int
    acked: bool = False


@dataclass
class _PendingEvent:
    payload: dict[str, Any]
    acked: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Connection:
    number: int
    ws: web.WebSocketResponse


class SocketModeHub:
    """The app's Socket Mode side: delivers event callbacks until each is acked or given up."""

    def __init__(self, app_id: str, ack_timeout: float = 3.0, max_retries: int = MAX_RETRIES) -> None:
        self.app_id = app_id
        self.ack_timeout = ack_timeout
        self.max_retries = max_retries
        self.deliveries: list[Delivery] = []
        self.connections_opened = 0
        self.given_up: list[str] = []
        self._connections: list[_Connection] = []
        self._next_connection = 0
        self._any_connection = asyncio.Event()
        self._pending: dict[str, _PendingEvent] = {}
        self._envelope_event: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._deliveries_running: set[asyncio.Task[None]] = set()
        self._tickets: set[str] = set()

    # -- tickets and connections ---------------------------------------------------------

    def issue_ticket(self) -> str:
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        return ticket

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    async def wait_for_connections(self, count: int = 1, timeout: float = 10.0) -> None:
        async def enough() -> None:
            while len(self._connections) < count:
                await asyncio.sleep(0.02)

        await asyncio.wait_for(enough(), timeout)

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("ticket") not in self._tickets:
            # Slack refuses a link it did not hand out by apps.connections.open.
            return web.Response(status=401, text="invalid ticket: get a URL from apps.connections.open")
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.connections_opened += 1
        connection = _Connection(self.connections_opened, ws)
        self._connections.append(connection)
        self._any_connection.set()
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._connections),
                "debug_info": {
                    "host": "applink-scripted",
                    "build_number": 1,
                    "approximate_connection_time": 18060,
                },
                "connection_info": {"app_id": self.app_id},
            }
        )
        try:
            async for frame in ws:
                if frame.type == WSMsgType.TEXT:
                    self._on_text(frame.data)
        finally:
            self._drop(connection)
        return ws

    def _drop(self, connection: _Connection) -> None:
        if connection in self._connections:
            self._connections.remove(connection)
        if not self._connections:
            self._any_connection.clear()

    def _on_text(self, data: str) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            logger.info("socket mode: ignoring a frame that is not JSON: %.80s", data)
            return
        envelope_id = message.get("envelope_id") if isinstance(message, dict) else None
        event_id = self._envelope_event.get(str(envelope_id))
        if event_id is None:
            logger.info("socket mode: ack for an unknown envelope %s", envelope_id)
            return
        for delivery in self.deliveries:
            if delivery.envelope_id == envelope_id:
                delivery.acked = True
        pending = self._pending.get(event_id)
        if pending is not None:
            pending.acked.set()

    async def disconnect(self, reason: str = "refresh_requested", close_after: float = 0.5) -> int:
        """Tell every open connection to go away, then close it; returns how many were told."""
        connections = list(self._connections)
        for connection in connections:
            await connection.ws.send_json(
                {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-scripted"}}
            )
        if close_after >= 0:
            self._spawn(self._close_later(connections, close_after))
        return len(connections)

    async def _close_later(self, connections: list[_Connection], delay: float) -> None:
        await asyncio.sleep(delay)
        for connection in connections:
            await connection.ws.close()
            self._drop(connection)

    # -- delivery ----------------------------------------------------------------------

    def publish(self, payload: dict[str, Any]) -> None:
        """Deliver an event callback (with `event_id`) until acked or retried out."""
        pending = _PendingEvent(payload)
        self._pending[payload["event_id"]] = pending
        task = self._spawn(self._deliver(pending))
        self._deliveries_running.add(task)
        task.add_done_callback(self._deliveries_running.discard)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _deliver(self, pending: _PendingEvent) -> None:
        event_id = pending.payload["event_id"]
        for attempt in range(self.max_retries + 1):
            connection = await self._pick_connection()
            envelope_id = str(uuid.uuid4())
            self._envelope_event[envelope_id] = event_id
            envelope = {
                "envelope_id": envelope_id,
                "payload": pending.payload,
                "type": "events_api",
                "accepts_response_payload": False,
                "retry_attempt": attempt,
                "retry_reason": "timeout" if attempt else "",
            }
            self.deliveries.append(
                Delivery(envelope_id, event_id, pending.payload["event"]["type"], attempt, connection.number)
            )
            try:
                await connection.ws.send_json(envelope)
            except ConnectionError:
                logger.info("socket mode: connection %d went away while sending", connection.number)
            try:
                await asyncio.wait_for(pending.acked.wait(), self.ack_timeout)
                return
            except TimeoutError:
                continue
        self.given_up.append(event_id)

    async def _pick_connection(self) -> _Connection:
        # Slack holds events while an app has no connection and spreads them over several.
        while True:
            await self._any_connection.wait()
            live = [c for c in self._connections if not c.ws.closed]
            if live:
                self._next_connection += 1
                return live[self._next_connection % len(live)]
            await asyncio.sleep(0.02)

    async def idle(self, timeout: float = 10.0) -> None:
        """Wait until every published event is acked or given up."""

        async def settled() -> None:
            while self._deliveries_running:
                await asyncio.sleep(0.02)

        await asyncio.wait_for(settled(), timeout)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for connection in list(self._connections):
            await connection.ws.close()
        self._connections.clear()
