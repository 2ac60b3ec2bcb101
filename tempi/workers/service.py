"""tempi's background service: an embedded Temporal dev server plus a worker, shared by
every `tempi` process of the user, that stops itself after an idle period.

Run as `python -m tempi.workers.service --home DIR`; clients start it on demand
(`ensure_service`) and find it through `DIR/server.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tempi.workers.dev_server import (
    INSECURE_ENV,
    IsolationUnavailable,
    free_port,
    launch_isolated_dev_server,
    port_open,
    start_dev_server,
    unix_address,
    unix_socket_answers,
    wait_isolated_dev_server,
)

DEFAULT_IDLE_MINUTES = 30.0


@dataclass
class ServiceInfo:
    address: str
    pid: int
    started: float
    ui: str | None = None
    codec: str = ""  # its codec keys' fingerprint (tempi.workers.codec.ring_fingerprint)


def info_path(home: Path) -> Path:
    return home / "server.json"


def read_info(home: Path) -> ServiceInfo | None:
    try:
        data = json.loads(info_path(home).read_text())
        info = ServiceInfo(**data)
    except (FileNotFoundError, ValueError, TypeError):
        return None
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return None
    if info.address.startswith("unix://"):
        return info if unix_socket_answers(Path(info.address.removeprefix("unix://"))) else None
    port = int(info.address.rsplit(":", 1)[1])
    return info if port_open(port) else None


def sessions_root(home: Path) -> Path:
    return home / "sessions"


async def serve(
    home: Path, *, port: int | None, idle_minutes: float, ui_port: int | None, isolated: bool = False
) -> None:
    """Run the dev server and a worker for `home` until stopped or idle.

    `isolated` (the background service): the server is reachable by this user alone, through
    a Unix socket (see tempi.workers.netns_bridge). Otherwise it listens on 127.0.0.1:`port`,
    open to every local user, as `tempi server` in the foreground promises."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "logs").mkdir(exist_ok=True)
    lock = open(home / "service.lock", "w")  # noqa: SIM115 - held for the life of the process
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("another tempi service already runs for this home", file=sys.stderr)
        return
    log_path = home / "logs" / "temporal.log"
    server: subprocess.Popen[bytes] | None = None
    if isolated:
        try:
            server, sock = launch_isolated_dev_server(home, log_path=log_path)
        except IsolationUnavailable as err:
            _without_isolation(err)
    # Loaded while the server boots: the clients importing this module (to find or start
    # the service) need none of it, and here it costs no wall time where a second core runs
    # the server.
    from tempi.workers.activity_tracker import ActivityTracker
    from tempi.workers.codec import load_key_ring, ring_fingerprint
    from tempi.workers.provider_preload import preload_default_provider
    from tempi.workers.telemetry import serve_metrics
    from tempi.workers.temporal_client import connect
    from tempi.workers.temporal_connection import TemporalSettingsError
    from tempi.workers.worker import running_workers

    if server is not None:
        try:
            wait_isolated_dev_server(server, sock, log_path=log_path)
            address = unix_address(sock)
        except IsolationUnavailable as err:
            _without_isolation(err)
            server = None
    if server is None:
        port = port or free_port()
        server = start_dev_server(
            home / "temporal.db", port, ui_port=ui_port, log_path=log_path, die_with_parent=True
        )
        address = f"127.0.0.1:{port}"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tracker = ActivityTracker()
    try:
        try:
            serve_metrics()
        except TemporalSettingsError as err:
            # A `tempi worker` that started this server may hold the port already.
            print(f"tempi: {err} The server runs without metrics.", file=sys.stderr, flush=True)
        client = await connect(address)
        info = ServiceInfo(
            address=address,
            pid=os.getpid(),
            started=time.time(),
            ui=f"http://127.0.0.1:{ui_port}" if ui_port else None,
            codec=ring_fingerprint(load_key_ring()),
        )
        tmp = info_path(home).with_suffix(".tmp")
        tmp.write_text(json.dumps(info.__dict__))
        os.replace(tmp, info_path(home))
        # The first model call needs its provider's SDK more than the first sandbox needs the
        # Docker probe: the SDK loads as the workers start, and the probe waits for it.
        preload = asyncio.create_task(preload_default_provider())
        async with running_workers(
            client, sessions_root=sessions_root(home), activity_hook=tracker, sandboxes_after=preload
        ):
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 5)
                if idle_minutes > 0 and tracker.idle_for() > idle_minutes * 60:
                    break
            preload.cancel()
    finally:
        with contextlib.suppress(FileNotFoundError):
            info_path(home).unlink()
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()


def _without_isolation(err: IsolationUnavailable) -> None:
    """Go on with a server on 127.0.0.1 only when the user said so; else stop, saying why."""
    if os.environ.get(INSECURE_ENV) != "1":
        raise SystemExit(
            f"tempi: cannot start the embedded Temporal server where only you can reach it "
            f"({err}): this needs unprivileged user namespaces (`unshare --user --net`). "
            f"Enable them, or run a Temporal server of your own and set TEMPORAL_ADDRESS, or "
            f"set {INSECURE_ENV}=1 to accept a server on 127.0.0.1 that every local user "
            "can reach (and so run commands as you)."
        ) from err
    print(f"tempi: {err}; {INSECURE_ENV}=1, so the server is open to local users", file=sys.stderr)


# Services this process started ahead of need (start_early), until ensure_service takes
# them over; what is left at exit was never needed (see drop_unneeded).
_early: dict[Path, tuple[subprocess.Popen[bytes], Path, int]] = {}


def start_early(home: Path) -> None:
    """Start the service for `home` in the background, without waiting, when it does not run:
    a command that will need it calls this before loading its own modules, so the service
    boots side by side with it; ensure_service then waits for this one."""
    if home not in _early and read_info(home) is None:
        _early[home] = _spawn(home)


def drop_unneeded() -> None:
    """Stop the services start_early started that the command never asked for (it failed
    before it needed one), so a mistyped command leaves no server behind."""
    for child, _, _ in _early.values():
        with contextlib.suppress(ProcessLookupError):
            child.terminate()
    _early.clear()


def ensure_service(home: Path, *, quiet: bool = False, timeout_s: float = 90) -> ServiceInfo:
    """Find the running service for `home`, starting it in the background when needed, and
    check that its workers read and write history with this process's codec keys."""
    from tempi.workers.codec import load_key_ring, mismatch, ring_fingerprint

    info = _find_or_start(home, quiet=quiet, timeout_s=timeout_s)
    problem = mismatch(info.pid, info.codec, ring_fingerprint(load_key_ring()))
    if problem is not None:
        raise problem
    return info


def _find_or_start(home: Path, *, quiet: bool, timeout_s: float) -> ServiceInfo:
    early = _early.pop(home, None)
    info = read_info(home)
    if info and early is None:
        return info
    if not quiet:  # also when the one started early is up already: this command started it
        print("tempi: starting the background Temporal server…", file=sys.stderr, flush=True)
    if info:
        return info
    child, log_path, start = early or _spawn(home)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = read_info(home)
        if info:
            return info
        if child.poll() is not None:
            # Another client's service may have won the race for the lock: that is fine.
            info = read_info(home)
            if info:
                return info
            if child.returncode != 0:
                raise RuntimeError(_log_since(log_path, start) or f"see {log_path}")
        time.sleep(0.05)
    raise RuntimeError(f"tempi's background server did not start; see {home / 'logs' / 'service.log'}")


def _spawn(home: Path) -> tuple[subprocess.Popen[bytes], Path, int]:
    """The service process for `home`, its log and where this start's lines begin in it."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "logs").mkdir(exist_ok=True)
    log_path = home / "logs" / "service.log"
    with open(log_path, "ab") as log:
        start = log.tell()
        child = subprocess.Popen(
            [sys.executable, "-m", "tempi.workers.service", "--home", str(home)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return child, log_path, start


def _log_since(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()[-4000:].decode(errors="replace").strip()
    except OSError:
        return ""


def stop_service(home: Path, timeout_s: float = 30) -> bool:
    info = read_info(home)
    if not info:
        return False
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not process_alive(info.pid):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(info.pid, signal.SIGKILL)
    return True


def process_alive(pid: int) -> bool:
    """Whether `pid` still runs. A service that has exited stays a zombie until the client
    that started it (maybe an interactive session still open) reaps it; that is gone too."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def main() -> None:
    parser = argparse.ArgumentParser(description="tempi background service (Temporal dev server + worker)")
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--ui-port", type=int, default=None)
    parser.add_argument(
        "--idle-minutes",
        type=float,
        default=float(os.environ.get("TEMPI_SERVER_IDLE_MINUTES", DEFAULT_IDLE_MINUTES)),
        help="stop after this long with no activity running (0 = never)",
    )
    args = parser.parse_args()
    asyncio.run(
        serve(
            args.home,
            port=args.port,
            idle_minutes=args.idle_minutes,
            ui_port=args.ui_port,
            # An explicit port or UI asks for a server others can reach; the default is private.
            isolated=args.port is None and args.ui_port is None,
        )
    )


if __name__ == "__main__":
    main()
