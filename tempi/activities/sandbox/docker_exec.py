"""Programs in a container through `docker exec`: output streamed as it arrives, and a
kill that reaches every process the program started.

Docker starts each exec as the leader of a new session and process group. Every exec
also carries a marker in its environment, which its children inherit; killing means
SIGKILL to the process group of each marked process and to each marked process itself
(so children that moved to a group of their own die too). The kill is a second exec,
so it works the same against a remote engine.

A streamed command is killed that way also when it ends normally: whatever it left
running in the background dies with the call, so leftovers cannot pile up against the
container's pids limit or keep an idle sandbox awake. (A process that both leaves the
call's process group and drops the marker from its environment escapes this.)
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import docker.errors
from docker.utils.socket import frames_iter

from tempi.activities.sandbox.errors import SandboxUnavailableError, engine_errors
from tempi.activities.tools.backend import ExecResult, OutputSink

EXEC_MARKER_ENV = "TEMPI_EXEC_ID"

# How often a long command is checked for having exited while something it left in the
# background still holds its output open.
_POLL_SECONDS = 0.5
# After the main process exits, how long the stream may stay open before what holds it (a
# background job of the command) is ended; the output already sent is read either way.
_DRAIN_GRACE_SECONDS = 0.25
# After a kill, how long to wait for the output stream to end before closing it.
_KILL_DRAIN_SECONDS = 2.0
_STDERR_KEEP = 64 * 1024
_STDOUT_FRAME, _STDERR_FRAME = 1, 2

# $1 is the marker value. The group of PID 1 (the container's init) is never signalled.
# Shell builtins only, no sleeping between rounds: a call that filled the container's
# pids limit leaves no room for the kill to fork, only for the one process it runs in.
_KILL_SCRIPT = r"""
marker="TEMPI_EXEC_ID=$1"
read -r init_stat < /proc/1/stat
init_fields=(${init_stat##*) })
init_group=${init_fields[2]}
for attempt in {1..200}; do
  found=
  for dir in /proc/[0-9]*; do
    hit=
    while IFS= read -r -d '' var; do
      if [[ $var == "$marker" ]]; then hit=1; break; fi
    done 2>/dev/null < "$dir/environ"
    [[ -n $hit ]] || continue
    found=yes
    read -r stat 2>/dev/null < "$dir/stat" || continue
    fields=(${stat##*) })
    group=${fields[2]}
    if (( group > 1 )) && [[ $group != "$init_group" ]]; then kill -9 -- "-$group" 2>/dev/null; fi
    kill -9 "${dir#/proc/}" 2>/dev/null
  done
  [[ -n $found ]] || exit 0
done
exit 1
"""


# The same in POSIX sh (busybox, dash). It forks (tr, grep) to read each environ, so a
# call that filled the pids limit may outlast it; images with bash avoid that.
_POSIX_KILL_SCRIPT = r"""
marker="TEMPI_EXEC_ID=$1"
read -r init_stat < /proc/1/stat
set -- ${init_stat##*) }
init_group=$3
round=0
while [ "$round" -lt 200 ]; do
  round=$((round + 1))
  found=
  for dir in /proc/[0-9]*; do
    tr '\0' '\n' 2>/dev/null < "$dir/environ" | grep -qxF "$marker" || continue
    found=yes
    read -r stat 2>/dev/null < "$dir/stat" || continue
    set -- ${stat##*) }
    group=$3
    if [ "$group" -gt 1 ] && [ "$group" != "$init_group" ]; then kill -9 "-$group" 2>/dev/null; fi
    kill -9 "${dir#/proc/}" 2>/dev/null
  done
  [ -n "$found" ] || exit 0
done
exit 1
"""


@dataclass(frozen=True)
class ExecTarget:
    """Where programs run: a container, and the uid:gid they run as."""

    api: Any
    container_id: str
    user: str
    # The image may have no bash (a user's Alpine container): the kill uses POSIX sh.
    posix_only: bool = False


@dataclass(frozen=True)
class Completed:
    exit_code: int
    stdout: bytes
    stderr: bytes


def run_to_completion(
    target: ExecTarget,
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    workdir: str | None = None,
) -> Completed:
    """Run a short helper program and collect its output (blocking)."""
    environment = [f"{key}={value}" for key, value in (env or {}).items()]
    api = target.api
    with engine_errors(target.container_id):
        exec_id = api.exec_create(
            target.container_id, list(argv), environment=environment, workdir=workdir, user=target.user
        )["Id"]
        stdout, stderr = api.exec_start(exec_id, demux=True)
        exit_code = _exit_code(api, exec_id)
    return Completed(exit_code, stdout or b"", stderr or b"")


def _exit_code(api: Any, exec_id: str) -> int:
    # The output can end a moment before the engine records the exit.
    deadline = time.monotonic() + 5
    while True:
        info = api.exec_inspect(exec_id)
        if not info["Running"] and info["ExitCode"] is not None:
            return int(info["ExitCode"])
        if time.monotonic() > deadline:
            raise SandboxUnavailableError("The Docker engine did not report how a command ended")
        time.sleep(0.02)


def kill_marked(target: ExecTarget, marker: str) -> None:
    """SIGKILL everything started by the exec with this marker (blocking)."""
    # Best effort: a container that is gone has nothing left to kill.
    with contextlib.suppress(SandboxUnavailableError, docker.errors.APIError):
        script, shell = (_POSIX_KILL_SCRIPT, "sh") if target.posix_only else (_KILL_SCRIPT, "bash")
        run_to_completion(target, [shell, "-c", script, "tempi-kill", marker])


def _close_stream(sock: Any) -> None:
    raw = getattr(sock, "_sock", sock)
    with contextlib.suppress(OSError, AttributeError):
        raw.shutdown(socket.SHUT_RDWR)  # wakes the reader blocked on it
    response = getattr(sock, "_response", None)
    for closable in (response, sock):
        with contextlib.suppress(OSError, ValueError):  # ValueError: closed already
            if closable is not None:
                closable.close()


class _OutputPump:
    """Reads the exec's multiplexed output on a thread of its own (never the shared pool,
    which the kill needs) and hands each chunk to the event loop in order."""

    def __init__(self, sock: Any, deliver: OutputSink, keep_stderr: OutputSink | None) -> None:
        self._sock = sock
        self._deliver = deliver
        self._keep_stderr = keep_stderr
        self._loop = asyncio.get_running_loop()
        self.finished: asyncio.Future[None] = self._loop.create_future()
        self._closed = False
        threading.Thread(target=self._run, name="tempi-docker-exec-output", daemon=True).start()

    def _run(self) -> None:
        try:
            for stream, data in frames_iter(self._sock, tty=False):
                self._call(self._on_frame, stream, data)
        except (OSError, ValueError):
            pass  # the stream was closed under us
        finally:
            self._call(self._finish)

    def _call(self, callback: Any, *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is listening
            self._loop.call_soon_threadsafe(callback, *args)

    def _on_frame(self, stream: int, data: bytes) -> None:
        if self._closed:
            return
        if stream == _STDERR_FRAME and self._keep_stderr is not None:
            self._keep_stderr(data)
        else:
            self._deliver(data)

    def _finish(self) -> None:
        if not self.finished.done():
            self.finished.set_result(None)

    def close(self) -> None:
        self._closed = True
        _close_stream(self._sock)


def _start(target: ExecTarget, argv: list[str], cwd: str, marker: str) -> tuple[str, Any]:
    api = target.api
    with engine_errors(target.container_id):
        exec_id = api.exec_create(
            target.container_id,
            argv,
            workdir=cwd,
            environment=[f"{EXEC_MARKER_ENV}={marker}"],
            user=target.user,
        )["Id"]
        return exec_id, api.exec_start(exec_id, socket=True)


def _running(target: ExecTarget, exec_id: str) -> bool:
    with engine_errors(target.container_id):
        return bool(target.api.exec_inspect(exec_id)["Running"])


async def stream_exec(
    target: ExecTarget,
    argv: Sequence[str],
    *,
    cwd: str,
    on_output: OutputSink,
    timeout: float | None = None,
    abort: asyncio.Event | None = None,
    merge_stderr: bool = True,
) -> ExecResult:
    """`ExecutionBackend.exec` for a container."""
    marker = secrets.token_hex(8)
    # Docker copies stdout and stderr separately, losing their order; one pipe keeps it.
    command = ["sh", "-c", 'exec "$@" 2>&1', "sh", *argv] if merge_stderr else list(argv)
    starting = asyncio.ensure_future(asyncio.to_thread(_start, target, command, cwd, marker))
    try:
        exec_id, sock = await asyncio.shield(starting)
    except asyncio.CancelledError:
        # The exec may start anyway: let it, then kill it.
        with contextlib.suppress(Exception):
            _close_stream((await starting)[1])
        await asyncio.to_thread(kill_marked, target, marker)
        raise

    stderr = bytearray()

    def keep_stderr(chunk: bytes) -> None:
        if len(stderr) < _STDERR_KEEP:
            stderr.extend(chunk[: _STDERR_KEEP - len(stderr)])

    pump = _OutputPump(sock, on_output, None if merge_stderr else keep_stderr)
    loop = asyncio.get_running_loop()
    abort_wait = asyncio.ensure_future(abort.wait()) if abort is not None else None
    deadline = None if timeout is None else loop.time() + timeout
    timed_out = aborted = killed = False
    try:
        while not pump.finished.done():
            watched: set[asyncio.Future[Any]] = {pump.finished}
            if abort_wait is not None:
                watched.add(abort_wait)
            step = _POLL_SECONDS if deadline is None else max(0.0, min(_POLL_SECONDS, deadline - loop.time()))
            await asyncio.wait(watched, timeout=step, return_when=asyncio.FIRST_COMPLETED)
            if pump.finished.done():
                break
            if abort_wait is not None and abort_wait.done():
                aborted = True
                break
            if deadline is not None and loop.time() >= deadline:
                timed_out = True
                break
            if not await asyncio.to_thread(_running, target, exec_id):
                # The command is over, but the stream is not: its last output is still on the
                # way (a loaded engine reports the exit first), or a background job of its
                # holds the stream open. Closing it now would drop that output; ending the
                # jobs lets the stream end with everything it carried.
                await asyncio.wait({pump.finished}, timeout=_DRAIN_GRACE_SECONDS)
                if not pump.finished.done():
                    await asyncio.to_thread(kill_marked, target, marker)
                    killed = True
                    await asyncio.wait({pump.finished}, timeout=_KILL_DRAIN_SECONDS)
                break
        if timed_out or aborted:
            await asyncio.to_thread(kill_marked, target, marker)
            await asyncio.wait({pump.finished}, timeout=_KILL_DRAIN_SECONDS)
    except BaseException:
        # Cancelled (or the engine failed): the command must not outlive the call.
        await asyncio.shield(asyncio.to_thread(kill_marked, target, marker))
        raise
    finally:
        pump.close()
        if abort_wait is not None:
            abort_wait.cancel()
    if not (timed_out or aborted or killed):
        await asyncio.to_thread(kill_marked, target, marker)  # background jobs end with the call
    if timed_out or aborted:
        return ExecResult(None, timed_out=timed_out, aborted=aborted, stderr=bytes(stderr))
    with engine_errors(target.container_id):
        exit_code = await asyncio.to_thread(_exit_code, target.api, exec_id)
    return ExecResult(exit_code, stderr=bytes(stderr))
