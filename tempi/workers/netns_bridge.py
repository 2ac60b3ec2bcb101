"""The embedded Temporal dev server, private to its owner.

The dev server has no authentication and `temporal server start-dev` offers no TLS, so any
local user who can reach its TCP port can read every session and start sessions that the
owner's worker runs. This process runs inside its own user and network namespace
(`unshare --user --map-root-user --net`): the server's port lives on a loopback no other
process on the machine can reach, and the only way in is a Unix socket in a 0700 directory
of the owner, which this process forwards to the server.

It is also the server's owner for item "one server per home": it holds `devserver.lock`
(passed on to the server process, so the lock outlives neither), stops servers an earlier,
killed owner left running on the same database, and dies with the service that started it.

Run as `unshare --user --map-root-user --net python -m tempi.workers.netns_bridge ...`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tempi.workers.dev_server import dev_server_args

PR_SET_PDEATHSIG = 1
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
INNER_PORT = 7233  # any port will do: this loopback belongs to this namespace alone
LOCK_WAIT_S = 30.0


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when the process that started it dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def die_with(parent_pid: int) -> Callable[[], None]:
    """A preexec_fn for a child that must die with `parent_pid` (the caller): the request only
    covers a death after it is made, so a parent already gone by then ends the child too
    (else a server started as its parent was killed outlived it)."""

    def arrange() -> None:
        die_with_parent()
        if os.getppid() != parent_pid:
            os._exit(1)

    return arrange


def loopback_up() -> None:
    """A new network namespace starts with `lo` down; the server needs it to bind 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | IFF_UP))


def take_lock(path: Path) -> int:
    """The home's dev-server lock; waits a while for a dying previous owner to let go."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise SystemExit(f"another Temporal dev server still holds {path}") from None
            time.sleep(0.1)


def servers_on(db_path: Path) -> list[int]:
    """Dev server processes of this user running on `db_path` (orphans, once we hold the lock)."""
    found = []
    me = os.getuid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != me:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"start-dev" in argv and str(db_path).encode() in argv:
            found.append(int(entry.name))
    return found


def stop_orphans(db_path: Path) -> None:
    pids = servers_on(db_path)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()


async def _forward(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
    try:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", INNER_PORT)
    except OSError:
        client_w.close()
        return
    sock = server_w.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    await asyncio.gather(_pump(client_r, server_w), _pump(server_r, client_w))


async def bridge(socket_path: Path, server: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()
    old_umask = os.umask(0o077)
    try:
        unix_server = await asyncio.start_unix_server(_forward, path=str(socket_path))
    finally:
        os.umask(old_umask)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with unix_server:
        while not stop.is_set() and server.poll() is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1)
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--socket", type=Path, required=True)
    p.add_argument("--db", type=Path, required=True)
    p.add_argument("--lock", type=Path, required=True)
    p.add_argument("--parent-pid", type=int, required=True)
    p.add_argument("--log", type=Path, default=None)
    p.add_argument("temporal", help="the temporal CLI binary")
    args = p.parse_args()
    die_with_parent()
    if os.getppid() != args.parent_pid:  # the parent died before the line above took effect
        sys.exit("the tempi service that started this bridge is gone")
    loopback_up()
    lock_fd = take_lock(args.lock)
    stop_orphans(args.db)
    log = open(args.log, "ab") if args.log else subprocess.DEVNULL  # noqa: SIM115 - owned by the child
    command = [*dev_server_args(args.temporal, args.db, INNER_PORT), "--headless"]
    server = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        # The server holds the lock too, so a second server cannot start on this database
        # until this one is gone; and it dies with this bridge.
        pass_fds=(lock_fd,),
        preexec_fn=die_with(os.getpid()),
    )
    try:
        deadline = time.monotonic() + 60
        while not port_open(INNER_PORT):
            if server.poll() is not None:
                sys.exit(f"the Temporal dev server exited at start (code {server.returncode})")
            if time.monotonic() > deadline:
                sys.exit("the Temporal dev server did not start within 60 s")
            time.sleep(0.05)
        asyncio.run(bridge(args.socket, server))
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()


if __name__ == "__main__":
    main()
