"""The `local` execution backend: the worker's own filesystem and processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import stat as stat_module
import sys
from collections.abc import AsyncIterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

from tempi.activities.tools.backend import (
    DirEntry,
    EntryKind,
    ExecResult,
    FileStat,
    OutputSink,
    ToolUnavailableError,
)
from tempi.activities.tools.tool_env import tool_environment

# After the main process exits, how long to keep reading output still in flight.
# Background jobs that keep the pipe open would otherwise hang the tool forever.
_DRAIN_GRACE_SECONDS = 0.25
_READ_SIZE = 64 * 1024
_STDERR_KEEP = 64 * 1024


def _kind(mode: int) -> EntryKind:
    if stat_module.S_ISDIR(mode):
        return "dir"
    if stat_module.S_ISREG(mode):
        return "file"
    return "other"


@cache
def _find_shell() -> str:
    return shutil.which("bash") or "/bin/sh"


@cache
def _find_ripgrep() -> str | None:
    # The `ripgrep` PyPI package installs rg next to the interpreter, which is not on
    # PATH when tempi runs from a venv without activating it.
    candidates = [Path(sys.prefix) / "bin" / "rg", Path(sys.executable).parent / "rg"]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("rg")


def _write_atomically(path: str, data: bytes) -> None:
    target = os.path.realpath(path)  # write through symlinks, do not replace them
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    try:
        mode: int | None = stat_module.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    if os.path.isdir(target):
        raise IsADirectoryError(21, "Is a directory", path)
    temp = os.path.join(parent, f".{os.path.basename(target)}.tempi-{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except PermissionError:
        # A writable file in a read-only directory: no room for a temp file, write in place.
        with open(target, "wb") as handle:
            handle.write(data)
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _list_dir(path: str) -> list[DirEntry]:
    entries: list[DirEntry] = []
    with os.scandir(path) as scan:
        for entry in scan:
            try:
                kind: EntryKind = "dir" if entry.is_dir() else "file" if entry.is_file() else "other"
            except OSError:
                kind = "other"
            entries.append(DirEntry(entry.name, kind))
    return entries


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def _pump(reader: asyncio.StreamReader, sink: OutputSink) -> None:
    while chunk := await reader.read(_READ_SIZE):
        sink(chunk)


async def _open_pipe_reader(fd: int) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_READ_SIZE)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    return reader, transport


def _open_and_read(path: str, size: int) -> tuple[BinaryIO, bytes, bool]:
    """The open file, its first `size` bytes, and whether they were all of it. A buffered read
    comes back short only at the end, except from a terminal; only regular files are trusted."""
    handle = open(path, "rb")  # noqa: SIM115 - the caller closes it
    try:
        chunk = handle.read(size)
        at_end = len(chunk) < size and stat_module.S_ISREG(os.fstat(handle.fileno()).st_mode)
    except BaseException:
        handle.close()
        raise
    return handle, chunk, at_end


class LocalBackend:
    """Runs tools directly on this machine."""

    @property
    def home(self) -> str:
        return os.path.expanduser("~")

    async def stat(self, path: str) -> FileStat | None:
        try:
            info = await asyncio.to_thread(os.stat, path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return FileStat(_kind(info.st_mode), info.st_size)

    async def read_bytes(self, path: str) -> bytes:
        return await asyncio.to_thread(Path(path).read_bytes)

    async def iter_bytes(self, path: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        # Each trip to a thread costs ~70 µs: one opens the file and reads its first chunk,
        # and a file that fits in that chunk needs no other.
        handle, chunk, at_end = await asyncio.to_thread(_open_and_read, path, chunk_size)
        try:
            while chunk:
                yield chunk
                if at_end:
                    return
                chunk = await asyncio.to_thread(handle.read, chunk_size)
        finally:
            handle.close()

    async def write_bytes(self, path: str, data: bytes) -> None:
        await asyncio.to_thread(_write_atomically, path, data)

    async def list_dir(self, path: str) -> list[DirEntry]:
        return await asyncio.to_thread(_list_dir, path)

    def shell_argv(self, command: str) -> list[str]:
        return [_find_shell(), "-c", command]

    def ripgrep_argv(self) -> list[str]:
        rg = _find_ripgrep()
        if rg is None:
            raise ToolUnavailableError(
                "ripgrep (rg) was not found; install the `ripgrep` Python package in tempi's environment"
            )
        return [rg]

    async def exec(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        on_output: OutputSink,
        timeout: float | None = None,
        abort: asyncio.Event | None = None,
        merge_stderr: bool = True,
    ) -> ExecResult:
        # Our own pipes (not asyncio's PIPE) so both streams can share one pipe, keeping
        # their interleaving, and so we can stop reading when a background job holds it.
        out_r, out_w = os.pipe()
        err_r, err_w = (out_r, out_w) if merge_stderr else os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                # Never the worker's own environment: it holds provider keys and tokens.
                env=tool_environment(os.environ),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                start_new_session=True,
            )
        except BaseException:
            for fd in {out_r, out_w, err_r, err_w}:
                os.close(fd)
            raise
        for fd in {out_w, err_w}:
            os.close(fd)

        stderr = bytearray()

        def keep_stderr(chunk: bytes) -> None:
            if len(stderr) < _STDERR_KEEP:
                stderr.extend(chunk[: _STDERR_KEEP - len(stderr)])

        transports: list[asyncio.BaseTransport] = []
        readers: list[asyncio.Task[None]] = []
        waiter = asyncio.create_task(proc.wait())
        abort_wait = asyncio.create_task(abort.wait()) if abort is not None else None
        timed_out = aborted = False
        try:
            out_reader, out_transport = await _open_pipe_reader(out_r)
            transports.append(out_transport)
            readers.append(asyncio.create_task(_pump(out_reader, on_output)))
            if not merge_stderr:
                err_reader, err_transport = await _open_pipe_reader(err_r)
                transports.append(err_transport)
                readers.append(asyncio.create_task(_pump(err_reader, keep_stderr)))

            watched: set[asyncio.Future[Any]] = {waiter}
            if abort_wait is not None:
                watched.add(abort_wait)
            done, _ = await asyncio.wait(watched, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:
                aborted = abort_wait is not None and abort_wait in done
                timed_out = not aborted
                _kill_group(proc.pid)
                await waiter
            _, still_reading = await asyncio.wait(readers, timeout=_DRAIN_GRACE_SECONDS)
            for task in still_reading:
                task.cancel()
        except BaseException:
            _kill_group(proc.pid)
            raise
        finally:
            pending: list[asyncio.Future[Any]] = [*readers, waiter]
            if abort_wait is not None:
                pending.append(abort_wait)
            for future in pending:
                if not future.done():
                    future.cancel()
            for transport in transports:
                transport.close()
        exit_code = None if (timed_out or aborted) else proc.returncode
        return ExecResult(exit_code, timed_out=timed_out, aborted=aborted, stderr=bytes(stderr))
