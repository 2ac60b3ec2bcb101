"""HTTP connection pools shared by every provider call on an event loop.

An SDK client left to itself builds its own HTTP client: a new SSL context (about
17 ms) and a new connection, with a TLS handshake to the provider, on every turn.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any, Protocol, TypeVar


class _Closable(Protocol):
    @property
    def is_closed(self) -> bool: ...


PoolT = TypeVar("PoolT", bound=_Closable)

# Connections belong to the loop that opened them, so each loop has its own pools.
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Callable[[], Any], Any]] = (
    weakref.WeakKeyDictionary()
)


def shared_http_client(make: Callable[[], PoolT]) -> PoolT:
    """The pool `make` builds (an SDK's default HTTP client class), one per running loop."""
    pools = _pools.setdefault(asyncio.get_running_loop(), {})
    client: PoolT | None = pools.get(make)
    if client is None or client.is_closed:
        client = pools[make] = make()
    return client
