"""The `docker` execution backend: tools run inside one long-lived sandbox container.

Programs run through `docker exec` as the sandbox's non-root user. Files are read and
written through the Docker archive API (which the engine serves as root, so reads are
not limited by file permissions); a write lands under a temporary name owned by the
sandbox user and is renamed into place inside the container, so readers never see half
a file. Listing a directory runs `find` instead, since an archive of a directory holds
its whole tree.
"""

from __future__ import annotations

import asyncio
import errno
import posixpath
import secrets
from collections.abc import AsyncIterator, Sequence
from typing import Any

from tempi.activities.sandbox.archive import (
    ArchiveFile,
    Owner,
    PathStat,
    file_tar,
    head_stat,
    open_file,
    put_tar,
)
from tempi.activities.sandbox.docker_exec import Completed, ExecTarget, run_to_completion, stream_exec
from tempi.activities.sandbox.errors import SandboxError, archive_os_error
from tempi.activities.tools.backend import DirEntry, EntryKind, ExecResult, FileStat, OutputSink

_LIST_SCRIPT = (
    'if [ ! -e "$1" ]; then exit 3; elif [ ! -d "$1" ]; then exit 4; fi; '
    'exec find -L "$1" -mindepth 1 -maxdepth 1 -printf "%Y\\t%f\\0"'
)
# The same without GNU find (busybox): POSIX sh, symlinks followed by the tests.
_POSIX_LIST_SCRIPT = (
    'if [ ! -e "$1" ]; then exit 3; elif [ ! -d "$1" ]; then exit 4; fi; '
    'if find "$1" -maxdepth 0 -printf "" >/dev/null 2>&1; then '
    'exec find -L "$1" -mindepth 1 -maxdepth 1 -printf "%Y\\t%f\\0"; fi; '
    'for p in "$1"/* "$1"/.[!.]* "$1"/..?*; do '
    '[ -e "$p" ] || [ -L "$p" ] || continue; '
    'if [ -d "$p" ]; then k=d; elif [ -f "$p" ]; then k=f; else k=o; fi; '
    'printf "%s\\t%s\\0" "$k" "${p##*/}"; done'
)
_FIND_KINDS: dict[str, EntryKind] = {"d": "dir", "f": "file"}

# The user tools run as. Sandboxes keep their main process as a different user, so
# nothing a tool runs (`kill -9 -1`, `pkill sleep`) can stop the container.
USER_LABEL = "tempi.user"


def _not_found(path: str) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, "No such file or directory", path)


# Commands use bash where the image has it, else sh (a user's Alpine container).
_ANY_SHELL = 'if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; fi; exec sh -c "$1"'


class DockerBackend:
    """Runs tools inside the sandbox container `container` (a docker SDK Container), as
    `user` (numeric uid:gid) if given, else the one its `tempi.user` label names, else the
    container's own user. `any_shell`: the image may lack bash (a container the user made)."""

    def __init__(self, container: Any, *, user: str | None = None, any_shell: bool = False) -> None:
        self._api = container.client.api
        self._id: str = container.id
        config = container.attrs.get("Config") or {}
        env = config.get("Env") or []
        self._home = next((item[len("HOME=") :] for item in env if item.startswith("HOME=")), "/")
        user = user or (config.get("Labels") or {}).get(USER_LABEL) or config.get("User") or ""
        uid, _, gid = user.partition(":")
        if not (uid.isdigit() and gid.isdigit()):
            raise SandboxError(f"The sandbox user must be a numeric uid:gid, not {user!r}")
        self._target = ExecTarget(self._api, self._id, user, posix_only=any_shell)
        # Files are written as the user commands run as, so those commands can change them.
        self._owner = Owner(int(uid), int(gid))
        self._any_shell = any_shell

    @property
    def container_id(self) -> str:
        return self._id

    @property
    def home(self) -> str:
        return self._home

    async def run(
        self, argv: Sequence[str], *, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> Completed:
        """Run a short helper program to completion and collect its output."""
        return await asyncio.to_thread(run_to_completion, self._target, argv, env=env, workdir=cwd)

    async def _lstat(self, path: str) -> PathStat | None:
        return await asyncio.to_thread(head_stat, self._api, self._id, path)

    async def _resolve(self, path: str) -> tuple[str, PathStat | None]:
        """The path with symlinks followed, and what is there (None: nothing)."""
        info = await self._lstat(path)
        if info is None or info.kind is not None:
            return path, info
        # The engine reports a symlink's fully resolved target.
        target = info.link_target
        resolved = await self._lstat(target)
        return target, resolved if resolved is not None and resolved.kind is not None else None

    async def stat(self, path: str) -> FileStat | None:
        _, info = await self._resolve(path)
        if info is None or info.kind is None:
            return None
        return FileStat(info.kind, info.size)

    async def _open(self, path: str) -> ArchiveFile:
        target, info = await self._resolve(path)
        if info is None:
            raise _not_found(path)
        if info.kind == "dir":
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        return await asyncio.to_thread(open_file, self._api, self._id, target)

    async def read_bytes(self, path: str) -> bytes:
        handle = await self._open(path)
        try:
            return await asyncio.to_thread(handle.read)
        finally:
            await asyncio.to_thread(handle.close)

    async def iter_bytes(self, path: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        handle = await self._open(path)
        try:
            while chunk := await asyncio.to_thread(handle.read, chunk_size):
                yield chunk
        finally:
            await asyncio.to_thread(handle.close)

    async def _existing_parent(self, directory: str, path: str) -> tuple[str, list[str]]:
        """The nearest directory that exists (symlinks followed), and the missing ones below it."""
        missing: list[str] = []
        while True:
            resolved, info = await self._resolve(directory)
            if info is not None:
                if info.kind != "dir":
                    raise NotADirectoryError(errno.ENOTDIR, "Not a directory", path)
                return resolved, missing
            if directory == "/":
                raise _not_found(path)
            missing.insert(0, posixpath.basename(directory))
            directory = posixpath.dirname(directory)

    async def write_bytes(self, path: str, data: bytes) -> None:
        target, info = await self._resolve(path)  # write through symlinks, do not replace them
        if info is not None and info.kind == "dir":
            raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
        mode = info.mode if info is not None and info.kind == "file" else 0o644
        directory, name = posixpath.split(target)
        existing, missing = await self._existing_parent(directory, path)
        temp_name = f".{name}.tempi-{secrets.token_hex(4)}.tmp"
        tar = file_tar(missing, temp_name, data, mode, self._owner)
        await asyncio.to_thread(put_tar, self._api, self._id, existing, tar)
        temp_path = posixpath.join(existing, *missing, temp_name)
        # -T (never into a directory) is GNU's; `target` was checked not to be one.
        no_dir = [] if self._any_shell else ["-T"]
        moved = await self.run(["mv", "-f", *no_dir, "--", temp_path, target])
        if moved.exit_code != 0:
            await self.run(["rm", "-f", "--", temp_path])
            raise archive_os_error(0, moved.stderr.decode("utf-8", errors="replace"), path)

    async def list_dir(self, path: str) -> list[DirEntry]:
        script = _POSIX_LIST_SCRIPT if self._any_shell else _LIST_SCRIPT
        result = await self.run(["sh", "-c", script, "tempi-ls", path])
        if result.exit_code == 3:
            raise _not_found(path)
        if result.exit_code == 4:
            raise NotADirectoryError(errno.ENOTDIR, "Not a directory", path)
        if result.exit_code != 0 and not result.stdout:
            raise archive_os_error(0, result.stderr.decode("utf-8", errors="replace"), path)
        entries: list[DirEntry] = []
        for record in result.stdout.split(b"\0"):
            kind, _, name = record.partition(b"\t")
            if name:
                entries.append(
                    DirEntry(
                        name.decode("utf-8", errors="surrogateescape"),
                        _FIND_KINDS.get(kind.decode(), "other"),
                    )
                )
        return entries

    def shell_argv(self, command: str) -> list[str]:
        if self._any_shell:
            return ["sh", "-c", _ANY_SHELL, "tempi-shell", command]
        return ["bash", "-c", command]

    def ripgrep_argv(self) -> list[str]:
        return ["rg"]  # part of the sandbox image

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
        return await stream_exec(
            self._target,
            argv,
            cwd=cwd,
            on_output=on_output,
            timeout=timeout,
            abort=abort,
            merge_stderr=merge_stderr,
        )
