"""The MCP activities: list the configured servers' tools when a session starts, and call
one. Both read the configuration on the worker, so `${VAR}` values are resolved here and
only names, schemas, arguments and results cross history."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio import activity

from tempi.activities.heartbeat import Heartbeater
from tempi.activities.mcp.connections import McpConnections, McpUnavailableError, describe_error
from tempi.activities.mcp.results import result_blocks
from tempi.activities.parked_results import find_parked, for_history, park_result
from tempi.activities.spans import traced_tool_call
from tempi.activities.tool_runs import WORKER_STOPPED_TOOL_TEXT
from tempi.activities.tools.tool_env import tool_environment
from tempi.agent.mcp_tools import McpServerProblem, McpTool, McpToolList, mcp_tool_name
from tempi.agent.messages import TextContent, ToolResultMessage
from tempi.agent.tool_specs import ToolOutcome
from tempi.config.errors import ConfigError
from tempi.config.mcp_json import (
    WORKER_ENV,
    McpServer,
    ResolvedServer,
    home_mcp_path,
    load_mcp_servers,
    resolve_server,
)
from tempi.extensions.hooks import context_for, hooked
from tempi.workflows import activity_names as names
from tempi.workflows.activity_payloads import McpCallInput, McpListInput, ToolCallResult
from tempi.workflows.session_types import SandboxKind

if TYPE_CHECKING:
    from mcp.types import Tool

MAX_LIST_PAGES = 50


def tool_from_listing(server: str, tool: Tool) -> McpTool:
    hints = tool.annotations
    return McpTool(
        name=mcp_tool_name(server, tool.name),
        server=server,
        tool=tool.name,
        description=tool.description or tool.title or "",
        parameters=tool.input_schema or {"type": "object", "properties": {}},
        read_only=bool(hints and hints.read_only_hint),
        idempotent=bool(hints and hints.idempotent_hint),
    )


def resolve_for_session(
    server: McpServer, cwd: Path, sandbox: SandboxKind = "local", env_label: str = WORKER_ENV
) -> ResolvedServer:
    """The server ready to connect, or a ConfigError: a repository's stdio server would run on
    the host, outside the sandbox the session asked for."""
    if server.project and server.transport == "stdio" and sandbox != "local":
        raise ConfigError(
            f"MCP server {server.name!r} from the repository's {server.source} runs a command, and "
            f"under --sandbox {sandbox} tempi does not run a repository's commands on the host; "
            f"configure it in {home_mcp_path()} to run it there, or work without a sandbox"
        )
    return resolve_server(server, cwd, env_label, project_env=tool_environment(os.environ))


async def list_server_tools(
    connections: McpConnections,
    server: McpServer,
    cwd: Path,
    env_label: str = WORKER_ENV,
    sandbox: SandboxKind = "local",
) -> list[McpTool]:
    """The server's tools; raises ConfigError or McpUnavailableError saying why not."""
    resolved = resolve_for_session(server, cwd, sandbox, env_label)
    client = await connections.client(resolved)
    tools: list[McpTool] = []
    cursor: str | None = None
    try:
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools += [tool_from_listing(server.name, t) for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
    except Exception as err:
        await connections.drop(resolved)
        raise McpUnavailableError(describe_error(err)) from err
    return tools


async def list_all_tools(
    connections: McpConnections, cwd: Path, sandbox: SandboxKind = "local"
) -> McpToolList:
    try:
        servers = load_mcp_servers(cwd)
    except ConfigError as err:
        return McpToolList(problems=[McpServerProblem(server="", error=str(err))])

    async def one(server: McpServer) -> list[McpTool] | McpServerProblem:
        try:
            return await list_server_tools(connections, server, cwd, sandbox=sandbox)
        except (ConfigError, McpUnavailableError) as err:
            return McpServerProblem(server=server.name, error=str(err))

    found = McpToolList()
    for outcome in await asyncio.gather(*(one(s) for s in servers.values())):
        if isinstance(outcome, McpServerProblem):
            found.problems.append(outcome)
        else:
            found.tools += outcome
    return found


class McpActivities:
    def __init__(self, connections: McpConnections | None = None) -> None:
        self.connections = connections or McpConnections()

    def all(self) -> list[Any]:
        return [self.list_mcp_tools, self.call_mcp_tool]

    @activity.defn(name=names.LIST_MCP_TOOLS)
    async def list_mcp_tools(self, inp: McpListInput) -> McpToolList:
        async with Heartbeater():
            return await list_all_tools(self.connections, Path(inp.cwd), inp.sandbox)

    @activity.defn(name=names.CALL_MCP_TOOL)
    async def call_mcp_tool(self, inp: McpCallInput) -> ToolCallResult:
        return await traced_tool_call(inp.tool_call.name, self._call_mcp_tool(inp))

    async def _call_mcp_tool(self, inp: McpCallInput) -> ToolCallResult:
        parked = find_parked(inp.file, inp.entry_id)
        if parked is not None:
            return ToolCallResult(message=for_history(ToolResultMessage.model_validate(parked["message"])))

        async def run(args: dict[str, Any]) -> ToolOutcome:
            content, details, is_error = await self._call(inp, args)
            return ToolOutcome(content=content, details=details, is_error=is_error)

        # The session's extensions see (and may block or change) MCP calls like any other.
        task = asyncio.create_task(hooked(inp.extensions, context_for(inp.file), inp.tool_call, run))
        effects = None
        try:
            async with Heartbeater():
                outcome, effects = await asyncio.shield(task)
            content, details, is_error = outcome.content, outcome.details, outcome.is_error
        except asyncio.CancelledError:
            task.cancel()
            stopped = WORKER_STOPPED_TOOL_TEXT if activity.is_worker_shutdown() else "Aborted by the user."
            content, details, is_error = [TextContent(text=stopped)], {}, True
        return park_result(
            inp,
            ToolResultMessage(
                tool_call_id=inp.tool_call.id,
                tool_name=inp.tool_call.name,
                content=content,
                details=details if details is not None else {},
                is_error=is_error,
                timestamp=inp.timestamp_ms,
            ),
            effects,
        )

    async def _call(self, inp: McpCallInput, args: dict[str, Any]) -> tuple[list[Any], dict[str, Any], bool]:
        tool = inp.tool
        try:
            server = load_mcp_servers(Path(inp.file.cwd)).get(tool.server)
            if server is None:
                return _error(f"MCP server {tool.server!r} is no longer configured in mcp.json.")
            resolved = resolve_for_session(server, Path(inp.file.cwd), inp.file.sandbox)
        except ConfigError as err:
            return _error(str(err))
        # A tool that may run again gets one more try on a restarted server.
        attempts = 2 if tool.effect == "reads" else 1
        for attempt in range(attempts):
            try:
                client = await self.connections.client(resolved)
            except McpUnavailableError as err:
                return _error(_down(tool.server, str(err)))
            try:
                result = await client.call_tool(tool.tool, args)
            except Exception as err:
                await self.connections.drop(resolved)
                if attempt + 1 < attempts:
                    continue
                if tool.effect == "reads":
                    return _error(_down(tool.server, describe_error(err)))
                return _error(
                    f"MCP server {tool.server!r} failed during the call ({describe_error(err)}); "
                    "the tool may or may not have run. Check before calling it again."
                )
            blocks, details = result_blocks(result)
            return blocks, {"server": tool.server, "tool": tool.tool, **details}, result.is_error
        raise AssertionError("unreachable")


def _down(server: str, why: str) -> str:
    return (
        f"MCP server {server!r} is not available: {why}. Its tools cannot be used now; carry on without them."
    )


def _error(text: str) -> tuple[list[Any], dict[str, Any], bool]:
    return [TextContent(text=text)], {}, True
