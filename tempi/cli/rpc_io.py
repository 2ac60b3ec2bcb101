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
from dataclasses import dataclass
from typing import Any, BinaryIO

from tempi.agent.json_depth import MAX_JSON_DEPTH, json_depth
from tempi.cli import pi_json

READ_CHUNK = 1024 * 1024
# Bigger lines are skipped, not buffered: a command carries at most a prompt with a few
# images, and Temporal refuses payloads over 2 MB anyway.
MAX_LINE_BYTES = 8 * 1024 * 1024
# How many chunks the reader thread may run ahead of the event loop.
QUEUED_CHUNKS = 16


@dataclass(frozen=True)
class LineTooLong:
    """A line that was skipped because it exceeded MAX_LINE_BYTES (`size` bytes so far
    when it was cut off, or its whole size)."""

    size: int


class LineSplitter:
    """Cuts a byte stream at LF. Work per chunk is proportional to the chunk, so a huge
    line costs no more than reading it; lines over `limit` are dropped as they arrive."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self.buffer = bytearray()
        self.skipping: int | None = None  # bytes of an oversize line dropped so far

    def feed(self, data: bytes) -> list[bytes | LineTooLong]:
        out: list[bytes | LineTooLong] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            if self.skipping is not None:
                self.skipping += len(piece)
            elif len(self.buffer) + len(piece) > self.limit:
                self.skipping = len(self.buffer) + len(piece)
                self.buffer = bytearray()
            else:
                self.buffer += piece
            if end < 0:
                return out
            out.append(self._take())
            start = end + 1

    def finish(self) -> list[bytes | LineTooLong]:
        """The last line when the stream ends without an LF."""
        if self.skipping is not None or bytes(self.buffer).strip():
            return [self._take()]
        return []

    def _take(self) -> bytes | LineTooLong:
        if self.skipping is not None:
            line: bytes | LineTooLong = LineTooLong(self.skipping)
        else:
            raw = bytes(self.buffer)
            line = raw[:-1] if raw.endswith(b"\r") else raw
        self.buffer = bytearray()
        self.skipping = None
        return line


async def read_lines(fd: int, limit: int = MAX_LINE_BYTES) -> AsyncIterator[bytes | LineTooLong]:
    """Lines from a file descriptor, read in a thread so the event loop never blocks.
    A last line without an LF still counts; a line over `limit` bytes comes as LineTooLong."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue()
    room = threading.Semaphore(QUEUED_CHUNKS)

    def pump() -> None:
        while True:
            room.acquire()
            try:
                data = os.read(fd, READ_CHUNK)
            except OSError:
                data = b""
            loop.call_soon_threadsafe(chunks.put_nowait, data)
            if not data:
                return

    threading.Thread(target=pump, name="rpc-stdin", daemon=True).start()
    splitter = LineSplitter(limit)
    while True:
        data = await chunks.get()
        room.release()
        lines = splitter.feed(data) if data else splitter.finish()
        for line in lines:
            yield line
        if not data:
            return


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
        line = pi_json.dumps(obj) + "\n"
        # A client that went away leaves the session running without it.
        with contextlib.suppress(BrokenPipeError):
            self.stream.write(line.encode("utf-8"))


def parse_command(line: bytes | LineTooLong) -> dict[str, Any] | str:
    """The command object, or an error message saying why the line is not one."""
    if isinstance(line, LineTooLong):
        return (
            f"Failed to parse command: the line is over {MAX_LINE_BYTES // (1024 * 1024)} MB "
            f"({line.size} bytes) and was skipped; send large files by path instead"
        )
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"Failed to parse command: the line is not valid UTF-8 ({err.reason} at byte {err.start})"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        return f"Failed to parse command: {err.msg} at line {err.lineno} column {err.colno}"
    except RecursionError:
        return f"Failed to parse command: JSON nested deeper than {MAX_JSON_DEPTH} levels"
    if json_depth(value) > MAX_JSON_DEPTH:
        return f"Failed to parse command: JSON nested deeper than {MAX_JSON_DEPTH} levels"
    if not isinstance(value, dict):
        return f"Failed to parse command: expected a JSON object, got {type(value).__name__}"
    if not isinstance(value.get("type"), str):
        return 'Failed to parse command: the object has no "type" string naming the command'
    return value
