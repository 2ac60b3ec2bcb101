"""`tempi mcp list`: the MCP servers this directory's sessions would use, whether each one
starts (or answers) and its tools, under the names the model sees."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from tempi.activities.mcp.activities import list_server_tools
from tempi.activities.mcp.connections import McpConnections, McpUnavailableError
from tempi.agent.mcp_tools import McpTool
from tempi.cli.errors import UserError
from tempi.config.errors import ConfigError
from tempi.config.mcp_json import (
    McpServer,
    home_mcp_path,
    load_mcp_servers,
    project_mcp_path,
    project_mcp_untrusted,
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tempi mcp",
        description=f"MCP servers from {home_mcp_path()} and ./.tempi/mcp.json (the project's replace the home's).",
    )
    sub = p.add_subparsers(dest="action", required=True)
    sub.add_parser("list", help="servers, their state and their tools")
    return p


async def cmd_mcp(argv: list[str]) -> int:
    _parser().parse_args(argv)
    cwd = Path.cwd().resolve()
    try:
        servers = load_mcp_servers(cwd)
    except ConfigError as err:
        raise UserError(str(err)) from err
    if project_mcp_untrusted(cwd):
        print(
            f"{project_mcp_path(cwd)} is left out: this repository is not trusted as it is now "
            "(`tempi --trust` here trusts it)."
        )
    if not servers:
        print(f"No MCP servers configured (looked in {home_mcp_path()} and {project_mcp_path(cwd)}).")
        return 0
    connections = McpConnections()
    try:
        found = await asyncio.gather(*(_probe(connections, s, cwd) for s in servers.values()))
    finally:
        await connections.close_all()
    for server, outcome in zip(servers.values(), found, strict=True):
        print(f"{server.name}  ({server.describe()}; from {server.source})")
        if isinstance(outcome, str):
            print(f"  state: error: {outcome}")
            continue
        print(f"  state: connected, {len(outcome)} tool{'s' if len(outcome) != 1 else ''}")
        for tool in outcome:
            print(f"  {tool.name}{_hints(tool)}  {_first_line(tool.description)}".rstrip())
    return 0 if all(not isinstance(o, str) for o in found) else 1


async def _probe(connections: McpConnections, server: McpServer, cwd: Path) -> list[McpTool] | str:
    try:
        # Sessions resolve ${VAR} on their worker; this command, in the terminal's process.
        return await list_server_tools(connections, server, cwd, "this terminal's environment")
    except (ConfigError, McpUnavailableError) as err:
        return str(err)


def _hints(tool: McpTool) -> str:
    if tool.read_only:
        return " [read-only]"
    if tool.idempotent:
        return " [idempotent]"
    return ""


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""
