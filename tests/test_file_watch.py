"""A watcher waiting for news wakes when its file is written, not at its next tick."""

from __future__ import annotations

import asyncio
import gc
import os
from pathlib import Path

from tempi.store.doorbell import ring
from tempi.store.file_watch import NewsWaker

# Long enough that a wait ending by its timeout fails the test's own deadline.
NEVER_S = 60.0


def _inotify_fds() -> int:
    return sum(
        os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
        for fd in os.listdir("/proc/self/fd")
        if os.path.exists(f"/proc/self/fd/{fd}")
    )


async def _woken(waker: NewsWaker) -> bool:
    async with asyncio.timeout(10):
        return await waker.wait(NEVER_S)


async def test_a_write_to_the_watched_file_wakes_the_wait_and_other_files_do_not(tmp_path: Path) -> None:
    bell = tmp_path / "wf-1"
    waker = NewsWaker()
    waker.watch(tmp_path, bell.name)
    assert await waker.wait(0) is False  # attached; nothing written yet
    ring(tmp_path / "wf-2")  # another workflow's doorbell in the same folder
    (tmp_path / "wf-1.watch").touch()  # a watcher's marker beside it
    assert await waker.wait(0.2) is False
    waiting = asyncio.create_task(_woken(waker))
    await asyncio.sleep(0.05)
    ring(bell)
    assert await waiting is True
    # A write while nobody waits is kept for the next wait, which returns at once.
    ring(bell)
    await asyncio.sleep(0.05)
    assert await _woken(waker) is True
    assert await waker.wait(0) is False
    waker.close()


async def test_a_doorbell_started_again_and_a_folder_made_later_still_wake(tmp_path: Path) -> None:
    from tempi.store import doorbell

    live = tmp_path / "session" / "live"
    bell = tmp_path / "bells" / "wf"
    bell.parent.mkdir()
    waker = NewsWaker()
    waker.watch(live)  # any file, in a folder that does not exist yet
    waker.watch(bell.parent, bell.name)
    assert await waker.wait(0) is False
    live.mkdir(parents=True)
    (live / "call-1.jsonl").write_text("{}\n")  # seen from the next wait on: nothing to wake
    assert await waker.wait(0) is False
    with (live / "call-1.jsonl").open("a") as f:
        f.write('{"delta": "x"}\n')
    assert await _woken(waker) is True
    ring(bell)
    assert await _woken(waker) is True
    old = doorbell.RESTART_AT_BYTES
    doorbell.RESTART_AT_BYTES = 1
    try:
        ring(bell)  # replaced by a new file renamed into place
    finally:
        doorbell.RESTART_AT_BYTES = old
    assert await _woken(waker) is True
    waker.close()


async def test_a_subagents_news_wakes_its_parent_and_watchers_leave_no_watch_open(tmp_path: Path) -> None:
    before = _inotify_fds()

    class Owner:
        pass

    parent_owner, child_owner = Owner(), Owner()
    parent = NewsWaker(parent_owner)
    child = NewsWaker(child_owner, also=parent)
    parent.watch(tmp_path, "parent")
    child.watch(tmp_path, "child")
    assert await parent.wait(0) is False and await child.wait(0) is False
    assert _inotify_fds() == before + 1  # one instance for the event loop, shared
    ring(tmp_path / "child")
    assert await _woken(parent) is True
    del parent_owner, child_owner
    gc.collect()
    assert _inotify_fds() == before


async def test_writes_to_a_file_watched_with_a_delay_wake_once_after_it(tmp_path: Path) -> None:
    waker = NewsWaker()
    waker.watch(tmp_path, after=0.2)  # a live folder: tokens written many times a turn
    assert await waker.wait(0) is False
    loop = asyncio.get_running_loop()
    started = loop.time()
    stream = tmp_path / "call.jsonl"
    for i in range(3):
        with stream.open("a") as f:
            f.write(f'{{"delta": "{i}"}}\n')
        await asyncio.sleep(0.01)
    assert await _woken(waker) is True
    assert loop.time() - started >= 0.2
    assert await waker.wait(0.4) is False  # the three writes made one wake
    # A wake meanwhile (a doorbell's ring) is the look that reads them: no second wake.
    with stream.open("a") as f:
        f.write('{"delta": "3"}\n')
    await asyncio.sleep(0.05)
    waker.wake()
    assert await _woken(waker) is True
    assert await waker.wait(0.4) is False
    waker.close()


async def test_a_watcher_that_goes_while_its_folder_wakes_leaves_the_others_woken(tmp_path: Path) -> None:
    # The collector can finalize a watcher's owner in the middle of the wakes a write hands
    # out (a closed `tempi attach` view, say); that once raised in the loop's callback, and
    # the watchers after it slept until their tick.
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))

    class GoesWithFirstWake(NewsWaker):
        def __init__(self, goes: list[NewsWaker]) -> None:
            super().__init__()
            self.goes = goes

        def wake(self, after: float = 0.0) -> None:
            super().wake(after)
            for other in self.goes:
                other.close()

    leaving = [NewsWaker() for _ in range(3)]
    first = GoesWithFirstWake(leaving)
    last = NewsWaker()
    for waker in (first, *leaving, last):
        waker.watch(tmp_path, "wf")
        assert await waker.wait(0) is False
    ring(tmp_path / "wf")
    assert await _woken(first) is True
    assert await _woken(last) is True
    assert errors == []
    first.close()
    last.close()
