"""A small MCP server the tests start: over stdio, or streamable HTTP with `--http PORT`.

Its tools: `lookup` (read-only) answers from a table and says whether the secret it was
given in its environment arrived (and whether a worker key leaked in); `record` (neither read-only nor idempotent) appends a
line to a file; `picture` returns an image; `whoami` returns the process id; `crash`
kills the server in the middle of the call; `slow_lookup` (read-only) and `slow_record` note
the call in $DEMO_LOG and answer when $DEMO_GATE exists."""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import signal
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ImageContent, TextContent, ToolAnnotations

# A 1x1 PNG.
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
        "0000000d4944415478da63f8ffff3f0005fe02fea7d6a4cf0000000049454e44ae426082"
    )
).decode()


def build(name: str) -> MCPServer:
    server = MCPServer(name)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup(key: str) -> str:
        """Look a word up in the server's table."""
        secret_ok = os.environ.get("DEMO_SECRET") == os.environ.get("DEMO_SECRET_EXPECTED", "")
        leaked = "MOCK_API_KEY" in os.environ  # a key of the worker's, not given in `env`
        return (
            f"{name} says {key} means {key.upper()}; secret {'ok' if secret_ok else 'missing'}"
            f"{'; worker key leaked' if leaked else ''}"
        )

    @server.tool()
    def record(line: str) -> str:
        """Append a line to the server's log file."""
        log = os.environ.get("DEMO_LOG")
        if log:
            with Path(log).open("a") as f:
                f.write(line + "\n")
        return f"recorded {line}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def picture() -> list[TextContent | ImageContent]:
        """A one-pixel picture."""
        return [
            TextContent(type="text", text="a pixel"),
            ImageContent(type="image", data=PIXEL, mime_type="image/png"),
        ]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def whoami() -> str:
        """The server's process id."""
        return str(os.getpid())

    async def note_then_wait(line: str) -> str:
        with Path(os.environ["DEMO_LOG"]).open("a") as f:
            f.write(line + "\n")
        while not Path(os.environ["DEMO_GATE"]).exists():
            await asyncio.sleep(0.05)
        return f"finished {line}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def slow_lookup(key: str) -> str:
        """Note the call in the log, then answer once the gate file exists."""
        return await note_then_wait(f"lookup {key}")

    @server.tool()
    async def slow_record(line: str) -> str:
        """Note the call in the log (a change), then answer once the gate file exists."""
        return await note_then_wait(f"record {line}")

    @server.tool()
    def crash() -> str:
        """Kill the server in the middle of the call."""
        os.kill(os.getpid(), signal.SIGKILL)
        return "unreachable"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="demo")
    parser.add_argument("--http", type=int)
    args = parser.parse_args()
    server = build(args.name)
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
