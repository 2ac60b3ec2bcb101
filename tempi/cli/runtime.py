"""Reaching Temporal from the command line: the shared background service by default, or
the cluster named by TEMPORAL_ADDRESS (with an in-process worker unless --no-worker)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from temporalio.client import Client

from tempi.config.paths import default_sessions_root, tempi_home
from tempi.workers.service import ensure_service
from tempi.workers.temporal_client import configured_address, connect


@dataclass
class Runtime:
    client: Client
    address: str
    embedded: bool


@contextlib.asynccontextmanager
async def open_runtime(*, no_worker: bool = False, quiet: bool = False) -> AsyncIterator[Runtime]:
    address = configured_address()
    if address is None:
        info = await asyncio.to_thread(ensure_service, tempi_home(), quiet=quiet)
        client = await connect(info.address)
        yield Runtime(client=client, address=info.address, embedded=True)
        return
    client = await connect(address)
    if no_worker:
        yield Runtime(client=client, address=address, embedded=False)
        return
    # Only here: the worker brings in the provider SDKs, which a client of the shared
    # background service (where that service runs the worker) does not need.
    from tempi.workers.worker import running_workers

    async with running_workers(client, sessions_root=default_sessions_root()):
        yield Runtime(client=client, address=address, embedded=False)
