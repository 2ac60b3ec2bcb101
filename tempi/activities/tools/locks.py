"""One writer per file at a time: same-file write/edit calls queue, different files run freely."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

# Resolved path -> (lock, number of holders and waiters). Entries go away when unused.
_locks: dict[str, tuple[asyncio.Lock, int]] = {}


@asynccontextmanager
async def path_lock(resolved_path: str) -> AsyncIterator[None]:
    """Hold the lock for `resolved_path` (an absolute, normalised path) in this process."""
    lock, users = _locks.get(resolved_path, (asyncio.Lock(), 0))
    _locks[resolved_path] = (lock, users + 1)
    try:
        async with lock:
            yield
    finally:
        lock, users = _locks[resolved_path]
        if users == 1:
            del _locks[resolved_path]
        else:
            _locks[resolved_path] = (lock, users - 1)
