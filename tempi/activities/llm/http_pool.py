"""HTTP connection pools, and the SDK clients over them, shared by every provider call on an
event loop.

An SDK client left to itself builds its own HTTP client: a new SSL context (about
17 ms) and a new connection, with a TLS handshake to the provider, on every turn. Even
over a shared pool, building the SDK client itself costs a busy worker a few percent of its
time, so a client is kept for as long as its settings (key, address, retries, timeout,
headers) come back.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar


class _Closable(Protocol):
    @property
    def is_closed(self) -> bool: ...


PoolT = TypeVar("PoolT", bound=_Closable)
ClientT = TypeVar("ClientT")

# Keys rotate (a `!command` key can change every call); the oldest clients go past this.
MAX_CLIENTS_PER_LOOP = 32

# Connections belong to the loop that opened them, so each loop has its own pools.
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Callable[[], Any], Any]] = (
    weakref.WeakKeyDictionary()
)
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, OrderedDict[Any, Any]] = (
    weakref.WeakKeyDictionary()
)


def shared_http_client(make: Callable[[], PoolT]) -> PoolT:
    """The pool `make` builds (an SDK's default HTTP client class), one per running loop."""
    pools = _pools.setdefault(asyncio.get_running_loop(), {})
    client: PoolT | None = pools.get(make)
    if client is None or client.is_closed:
        client = pools[make] = make()
    return client


def shared_sdk_client(
    sdk_client: Callable[..., ClientT],
    pool: Callable[[], PoolT],
    *,
    default_headers: Mapping[str, str] | None = None,
    **settings: Any,
) -> ClientT:
    """`sdk_client(http_client=<the loop's pool>, default_headers=..., **settings)`, reused
    while the settings and the pool are the same. `settings` must be hashable."""
    http_client = shared_http_client(pool)
    headers = tuple(sorted(default_headers.items())) if default_headers else None
    key = (sdk_client, http_client, headers, tuple(sorted(settings.items())))
    clients = _clients.setdefault(asyncio.get_running_loop(), OrderedDict())
    client: ClientT | None = clients.get(key)
    if client is None:
        client = clients[key] = sdk_client(
            http_client=http_client,
            default_headers=dict(default_headers) if default_headers else None,
            **settings,
        )
        if len(clients) > MAX_CLIENTS_PER_LOOP:
            clients.popitem(last=False)
    else:
        clients.move_to_end(key)
    return client
