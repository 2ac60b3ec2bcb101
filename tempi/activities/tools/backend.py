"""The execution backend: everything the tools do to a workspace goes through here.

Kept small and byte/stream oriented so that a backend without Python on the far side
(a Docker container driven by `docker exec` and the archive API, a bubblewrap sandbox)
can implement it. Paths are absolute paths in the backend's own filesystem.

Errors: file operations raise the standard `OSError` subclasses (`FileNotFoundError`,
`PermissionError`, `IsADirectoryError`, `NotADirectoryError`) so tools can turn them
into messages without knowing the backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

EntryKind = Literal["file", "dir", "other"]

# Receives each chunk of process output as it arrives.
OutputSink = Callable[[bytes], None]


@dataclass(frozen=True)
class FileStat:
    kind: EntryKind
    size: int


@dataclass(frozen=True)
class DirEntry:
    name: str
    kind: EntryKind  # symlinks are reported as what they point to


@dataclass(frozen=True)
class ExecResult:
    exit_code: int | None  # None when the process was killed (timeout, abort)
    timed_out: bool = False
    aborted: bool = False
    stderr: bytes = b""  # only filled when stderr was not merged into the output


class ToolUnavailableError(Exception):
    """A program a tool needs (ripgrep) is missing from the backend."""


class ExecutionBackend(Protocol):
    @property
    def home(self) -> str:
        """The home directory `~` expands to."""
        ...

    async def stat(self, path: str) -> FileStat | None:
        """What is at `path` (following symlinks), or None if nothing is."""
        ...

    async def read_bytes(self, path: str) -> bytes:
        """The whole file."""
        ...

    def iter_bytes(self, path: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        """The file in chunks, for files too large to hold at once."""
        ...

    async def write_bytes(self, path: str, data: bytes) -> None:
        """Replace the file's content, creating parent directories. Readers never see a
        half-written file."""
        ...

    async def list_dir(self, path: str) -> list[DirEntry]:
        """Entries of a directory, in no particular order, without `.` and `..`."""
        ...

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
        """Run a program in a new process group. Output is passed to `on_output` as it
        arrives (stdout and stderr interleaved when `merge_stderr`). On timeout, abort
        or cancellation the whole group is killed."""
        ...

    def shell_argv(self, command: str) -> list[str]:
        """The argv that runs a shell command line."""
        ...

    def ripgrep_argv(self) -> list[str]:
        """The argv prefix that runs ripgrep; raises ToolUnavailableError if there is none."""
        ...
