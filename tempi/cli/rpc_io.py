"""RPC framing: JSON lines split on LF only, and a stdout that carries nothing else.

Strings may hold U+2028 / U+2029 (valid inside JSON), so lines are cut at b"\\n" in the
raw byte stream and never with str.splitlines.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
from collections.abc import AsyncIterator
from typing import Any, BinaryIO

READ_CHUNK = 65536


def split_lines(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines (without their LF, and without a CR before it) and the remainder."""
    *lines, rest = buffer.split(b"\n")
    return [line[:-1] if line.endswith(b"\r") else line for line in lines], rest


async def read_lines(fd: int) -> AsyncIterator[bytes]:
    """Lines from a file descriptor, read in a thread so the event loop never blocks.
    A last line without an LF still counts."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue()

    def pump() -> None:
        while True:
            try:
                data = os.read(fd, READ_CHUNK)
            except OSError:
                data = b""
            loop.call_soon_threadsafe(chunks.put_nowait, data)
            if not data:
                return

    threading.Thread(target=pump, name="rpc-stdin", daemon=True).start()
    buffer = b""
    while True:
        data = await chunks.get()
        if not data:
            if buffer.strip():
                yield buffer[:-1] if buffer.endswith(b"\r") else buffer
            return
        lines, buffer = split_lines(buffer + data)
        for line in lines:
            yield line


class ProtocolOut:
    """The protocol stream. Taking it over points fd 1 (and sys.stdout) at stderr, so a
    stray print anywhere in the process cannot corrupt the protocol."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    @classmethod
    def take_over_stdout(cls) -> ProtocolOut:
        sys.stdout.flush()
        private = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        return cls(os.fdopen(private, "wb", buffering=0))

    def write(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
        # A client that went away leaves the session running without it.
        with contextlib.suppress(BrokenPipeError):
            self.stream.write(line.encode("utf-8"))


def parse_command(line: bytes) -> dict[str, Any] | str:
    """The command object, or an error message saying why the line is not one."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"Failed to parse command: the line is not valid UTF-8 ({err.reason} at byte {err.start})"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        return f"Failed to parse command: {err.msg} at line {err.lineno} column {err.colno}"
    if not isinstance(value, dict):
        return f"Failed to parse command: expected a JSON object, got {type(value).__name__}"
    if not isinstance(value.get("type"), str):
        return 'Failed to parse command: the object has no "type" string naming the command'
    return value
