"""Wakes a watcher as soon as a file it reads is written, instead of at its next tick.

A watcher on the worker's machine learns of news from files: the workflow's doorbell
(doorbell.py) and the live files a model call or a command streams into (live_channel.py).
It looked at them every POLL_INTERVAL_S (client/events.py), so a turn's events reached a
terminal up to that long after the worker rang, in batches on that tick. On Linux the kernel
says when a file in a folder is written (inotify): one instance per event loop (the kernel
allows a user 128 of them, so not one per watcher) watches each folder its watchers name, and
wakes each watcher whose file moved. Elsewhere, or when the kernel refuses, nothing wakes a
watcher early: it keeps its tick, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import struct
import weakref
from collections.abc import Iterator
from pathlib import Path

_IN_MODIFY = 0x00000002
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_IN_ONLYDIR = 0x01000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000
# A write, a new file, and a file renamed into place (a doorbell starting again).
_FOLDER_MASK = _IN_MODIFY | _IN_CREATE | _IN_MOVED_TO | _IN_ONLYDIR
_EVENT_HEAD = struct.Struct("iIII")  # wd, mask, cookie, name length


def _load_libc() -> ctypes.CDLL | None:
    try:
        # The process's own symbols, libc's among them (find_library would start a process).
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError, TypeError):
        return None  # not Linux (no inotify; on Windows no process symbols either)
    return libc


_libc = _load_libc()


def _events(data: bytes) -> Iterator[tuple[int, int, str]]:
    offset = 0
    while offset + _EVENT_HEAD.size <= len(data):
        wd, mask, _cookie, length = _EVENT_HEAD.unpack_from(data, offset)
        start = offset + _EVENT_HEAD.size
        name = data[start : start + length].rstrip(b"\0")
        offset = start + length
        yield wd, mask, os.fsdecode(name)


class _Kernel:
    """One event loop's inotify instance, and who waits on each folder it watches."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self.fd = fd
        self._loop = weakref.ref(loop)
        # Per watch: each waker, the file names it waits for (None: any file) and how long
        # after a write to each it wakes.
        self.waiting: dict[int, dict[NewsWaker, dict[str | None, float]]] = {}
        loop.add_reader(fd, self._read)
        self._closed = weakref.finalize(self, _close_fd, fd)

    def add(self, folder: Path, name: str | None, after: float, waker: NewsWaker) -> int | None:
        assert _libc is not None
        wd = int(_libc.inotify_add_watch(self.fd, os.fsencode(folder), _FOLDER_MASK))
        if wd < 0:
            return None  # no such folder yet, or not one: the waker tries again later
        self.waiting.setdefault(wd, {}).setdefault(waker, {})[name] = after
        return wd

    def remove(self, wd: int, waker: NewsWaker) -> None:
        waiting = self.waiting.get(wd)
        if waiting is not None:
            waiting.pop(waker, None)
            if not waiting:
                del self.waiting[wd]
                assert _libc is not None
                _libc.inotify_rm_watch(self.fd, wd)
        if not self.waiting:
            self.close()  # a watcher later gets a new instance: none stays open unused

    def close(self) -> None:
        loop = self._loop()
        if loop is not None:
            if not loop.is_closed():
                loop.remove_reader(self.fd)
            if _kernels.get(loop) is self:
                del _kernels[loop]
        waiting, self.waiting = self.waiting, {}
        for wd, wakers in waiting.items():
            for waker in list(wakers):
                waker.lost(wd)
        self._closed()

    def _read(self) -> None:
        try:
            data = os.read(self.fd, 64 * 1024)
        except BlockingIOError:
            return
        except OSError:
            self.close()  # each waker is told its watches are lost, and looks
            return
        for wd, mask, name in _events(data):
            if mask & _IN_Q_OVERFLOW:
                self._wake_all()  # events were dropped: every waker looks
                continue
            waiting = self.waiting.get(wd)
            if not waiting:
                continue
            # Copies: a watcher whose owner the collector finalizes meanwhile leaves its folder.
            if mask & _IN_IGNORED:  # the folder went: its wakers watch it again once it is back
                del self.waiting[wd]
                for waker in list(waiting):
                    waker.lost(wd)
                continue
            for waker, names in list(waiting.items()):
                after = names.get(name, names.get(None))
                if after is not None:
                    waker.wake(after)

    def _wake_all(self) -> None:
        for waiting in list(self.waiting.values()):
            for waker in list(waiting):
                waker.wake()


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


_kernels: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Kernel | None] = weakref.WeakKeyDictionary()


def _kernel() -> _Kernel | None:
    loop = asyncio.get_running_loop()
    if loop in _kernels:
        return _kernels[loop]
    kernel: _Kernel | None = None
    if _libc is not None:
        fd = int(_libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
        if fd >= 0:
            try:
                kernel = _Kernel(fd, loop)
            except (NotImplementedError, OSError):  # a loop that cannot watch fds
                _close_fd(fd)
    # A refusal (the user's instances used up) is remembered for the loop: its watchers tick.
    _kernels[loop] = kernel
    return kernel


class NewsWaker:
    """What one watcher waits on: woken by a write to any file it watches, or by `wake`.

    `also`: a waker to wake with this one (a parent session's watcher, which waits for its
    subagents' news as for its own). Closed when `owner` is collected, or by `close`."""

    def __init__(self, owner: object | None = None, *, also: NewsWaker | None = None) -> None:
        self._event = asyncio.Event()
        self._also = also
        self._wanted: dict[tuple[Path, str | None], float] = {}
        self._active: dict[tuple[Path, str | None], int] = {}
        self._later: asyncio.TimerHandle | None = None
        self._kernel: _Kernel | None = None
        if owner is not None:
            weakref.finalize(owner, self.close)

    def watch(self, folder: Path, name: str | None = None, *, after: float = 0.0) -> None:
        """Wake on writes to `name` in `folder` (None: any file there), `after` seconds
        later: writes meanwhile wake once. A folder that does not exist yet is watched from
        the first wait after it appears."""
        self._wanted[(folder, name)] = after

    def wake(self, after: float = 0.0) -> None:
        if after > 0:
            if self._later is None:
                self._later = asyncio.get_running_loop().call_later(after, self._wake_later)
            return
        self._event.set()
        if self._also is not None:
            self._also.wake()

    def _wake_later(self) -> None:
        self._later = None
        self.wake()

    def lost(self, wd: int) -> None:
        self._active = {key: at for key, at in self._active.items() if at != wd}
        self.wake()  # what was written as the folder went is looked at now

    async def wait(self, timeout: float) -> bool:
        """Until a watched file is written (True), or `timeout` (False). A write since the
        last wait returns at once: a watcher that looked meanwhile looks once more."""
        self._attach()
        woken = self._event.is_set()
        if not woken:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    woken = await self._event.wait()
        self._event.clear()
        if self._later is not None:  # what it would wake for, the look after this reads
            self._later.cancel()
            self._later = None
        return woken

    def close(self) -> None:
        if self._later is not None:
            self._later.cancel()
            self._later = None
        kernel, self._kernel = self._kernel, None
        if kernel is not None:
            for wd in set(self._active.values()):
                kernel.remove(wd, self)
        self._active.clear()

    def _attach(self) -> None:
        if len(self._active) == len(self._wanted):
            return
        kernel = _kernel()
        if kernel is None:
            return
        self._kernel = kernel
        for key in self._wanted.keys() - self._active.keys():
            wd = kernel.add(*key, self._wanted[key], self)
            if wd is not None:
                self._active[key] = wd
