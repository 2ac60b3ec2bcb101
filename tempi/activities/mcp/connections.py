"""The worker's MCP connections: each server is started (or dialled) once per worker process
and reused by every session whose configuration resolves to the same server; one that died
is started again on the next use.

A connection lives in a task of its own, because the mcp client's transports must be
entered and left by one task; calls from activities talk to it through its session."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from typing import TYPE_CHECKING, Any

from tempi.activities.tools.tool_env import tool_environment
from tempi.config.mcp_json import ResolvedServer

if TYPE_CHECKING:
    from mcp import Client

CONNECT_TIMEOUT_S = 30.0
# What servers print on stderr is theirs, not the worker log's.
_SERVER_STDERR = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process


class McpUnavailableError(Exception):
    """The server could not be started or reached; the message says why."""


def server_key(server: ResolvedServer) -> str:
    """Same resolved configuration, same connection; a digest so secrets are not kept as keys."""
    return hashlib.sha256(server.model_dump_json().encode()).hexdigest()


def _transport(server: ResolvedServer) -> Any:
    # The mcp package is imported on first use: every `tempi` start builds a worker.
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    if server.command:
        # The server starts from the tools' scrubbed environment (PATH, HOME, locale, what
        # TEMPI_TOOL_ENV lets through), never the worker's keys; what it needs comes from `env`.
        params = StdioServerParameters(
            command=server.command,
            args=server.args,
            env={**tool_environment(os.environ), **server.env},
            cwd=server.cwd,
        )
        return stdio_client(params, errlog=_SERVER_STDERR)
    assert server.url
    return streamable_http_client(server.url, http_client=create_mcp_http_client(headers=server.headers))


class McpConnection:
    def __init__(self, server: ResolvedServer) -> None:
        self.server = server
        self.client: Client | None = None
        self.error: BaseException | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.client is not None and self._task is not None and not self._task.done()

    async def open(self) -> Client:
        self._task = asyncio.create_task(self._hold(), name=f"mcp-{self.server.name}")
        try:
            await asyncio.wait_for(self._ready.wait(), CONNECT_TIMEOUT_S)
        except TimeoutError:
            await self.close()
            raise McpUnavailableError(f"no answer within {CONNECT_TIMEOUT_S:.0f} s") from None
        if self.client is None:
            raise McpUnavailableError(_describe(self.error))
        return self.client

    async def _hold(self) -> None:
        from mcp import Client

        try:
            async with Client(_transport(self.server)) as client:
                self.client = client
                self._ready.set()
                await self._stop.wait()
        except BaseException as err:
            self.error = err
        finally:
            self.client = None
            self._ready.set()

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self._task), 5)
            if not self._task.done():
                self._task.cancel()


def _describe(err: BaseException | None) -> str:
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    if err is None:
        return "the connection closed"
    text = str(err) or type(err).__name__
    return text


class McpConnections:
    """Connections by resolved server, for the life of the worker process."""

    def __init__(self) -> None:
        self._connections: dict[str, McpConnection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def client(self, server: ResolvedServer) -> Client:
        key = server_key(server)
        async with self._locks.setdefault(key, asyncio.Lock()):
            conn = self._connections.get(key)
            if conn is not None and conn.alive and conn.client is not None:
                return conn.client
            if conn is not None:
                await conn.close()
            conn = McpConnection(server)
            self._connections[key] = conn
            try:
                return await conn.open()
            except McpUnavailableError:
                self._connections.pop(key, None)
                raise

    async def drop(self, server: ResolvedServer) -> None:
        """Forget a connection that failed, so the next use starts the server again."""
        conn = self._connections.pop(server_key(server), None)
        if conn is not None:
            await conn.close()

    async def close_all(self) -> None:
        for conn in list(self._connections.values()):
            await conn.close()
        self._connections.clear()


def describe_error(err: BaseException) -> str:
    return _describe(err)
