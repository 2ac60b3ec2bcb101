"""Waiting on provider I/O while staying responsive to the caller's abort signal."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from tempi.activities.llm.errors import StreamAborted

T = TypeVar("T")


class AbortWatch:
    """Races each wait against an `asyncio.Event`; raises StreamAborted once it is set.

    An SDK stream blocks in a socket read between chunks, so checking a flag between
    chunks is not enough: the read itself must be abandoned when the user aborts.
    """

    def __init__(self, event: asyncio.Event | None) -> None:
        self._event = event
        self._waiter: asyncio.Task[bool] | None = None

    @property
    def aborted(self) -> bool:
        return self._event is not None and self._event.is_set()

    def check(self) -> None:
        if self.aborted:
            raise StreamAborted()

    async def run(self, awaitable: Awaitable[T]) -> T:
        """The result of `awaitable`, unless the abort signal fires first."""
        if self._event is None:
            return await awaitable
        task = asyncio.ensure_future(awaitable)
        if self._event.is_set():
            await _cancel(task)
            raise StreamAborted()
        if self._waiter is None:
            self._waiter = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait((task, self._waiter), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                await _cancel(task)
        if task.cancelled():
            raise StreamAborted()
        return task.result()

    async def iterate(self, source: AsyncIterator[T]) -> AsyncGenerator[T, None]:
        """Items of `source` until it ends or the abort signal fires."""
        while True:
            try:
                item = await self.run(anext(source))
            except StopAsyncIteration:
                return
            yield item

    async def sleep(self, seconds: float) -> None:
        await self.run(asyncio.sleep(seconds))

    async def close(self) -> None:
        if self._waiter is not None:
            await _cancel(self._waiter)
            self._waiter = None


async def _cancel(task: asyncio.Future[T]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def relay_stream(
    create: Awaitable[Any],
    abort: AbortWatch,
    convert: Callable[[AsyncIterator[Any]], AsyncIterator[T]],
) -> AsyncGenerator[T, None]:
    """Open an SDK stream and convert its events while honouring abort; the stream is
    closed however the caller stops reading, and its connection goes back to the pool."""
    stream = await abort.run(create)
    try:
        async with contextlib.aclosing(abort.iterate(stream)) as raw:
            async for event in convert(raw):
                yield event
    finally:
        await stream.close()
