"""Reaching Temporal from the command line: the shared background service by default, or
the server the Temporal settings name (TEMPORAL_ADDRESS, or a temporal.toml profile chosen
with TEMPORAL_PROFILE or TEMPORAL_CONFIG_FILE).

A client of a named server runs no worker unless TEMPI_CLIENT_WORKER=1 asks for one: on a
shared queue, a worker in a user's `tempi -p` would run other users' model calls and
commands in that user's process, with that user's environment."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.client import Client
from temporalio.service import RPCError

from tempi.config.paths import default_sessions_root, tempi_home
from tempi.workers.service import ensure_service
from tempi.workers.temporal_client import connect
from tempi.workers.temporal_connection import TemporalSettings, load_settings
from tempi.workflows.session_types import DEFAULT_TASK_QUEUE

CLIENT_WORKER_ENV = "TEMPI_CLIENT_WORKER"


@dataclass
class Runtime:
    client: Client
    address: str
    embedded: bool


def client_worker_asked() -> bool:
    return os.environ.get(CLIENT_WORKER_ENV, "").strip() == "1"


def runs_own_worker(no_worker: bool) -> bool:
    """Whether a command opening a runtime runs the worker of its sessions itself."""
    return load_settings().address is not None and not no_worker and client_worker_asked()


@contextlib.asynccontextmanager
async def open_runtime(*, no_worker: bool = False, quiet: bool = False) -> AsyncIterator[Runtime]:
    """`no_worker`: the command needs no worker at all (it lists, cancels, reads)."""
    settings = load_settings()
    address = settings.address
    if address is None:
        if settings.unchosen_profile_address and not quiet:
            print(
                f"tempi: not using {settings.unchosen_profile_address}, the address of temporal.toml's "
                "default profile; set TEMPORAL_PROFILE=default (or TEMPORAL_ADDRESS) to run there.",
                file=sys.stderr,
            )
        info = await asyncio.to_thread(ensure_service, tempi_home(), quiet=quiet)
        client = await connect(info.address)
        yield Runtime(client=client, address=info.address, embedded=True)
        return
    client = await connect(address)
    own_worker = not no_worker and client_worker_asked()
    if not quiet:
        print(f"tempi: on the Temporal server at {address} ({_named_by(settings)})", file=sys.stderr)
    if not own_worker:
        if not no_worker:
            await _say_if_no_worker(client, address)
        yield Runtime(client=client, address=address, embedded=False)
        return
    # Only here: the worker brings in the provider SDKs, which a client of the shared
    # background service (where that service runs the worker) does not need.
    from tempi.workers.worker import running_workers

    async with running_workers(client, sessions_root=default_sessions_root()):
        yield Runtime(client=client, address=address, embedded=False)


def _named_by(settings: TemporalSettings) -> str:
    if os.environ.get("TEMPORAL_ADDRESS"):
        return "TEMPORAL_ADDRESS"
    return settings.origin


async def _say_if_no_worker(client: Client, address: str, queue: str = DEFAULT_TASK_QUEUE) -> None:
    """A session on a queue no worker can take waits forever without a word: say so at once."""
    from tempi.cli.queue_pollers import deployments_polling, other_workers

    try:
        if await other_workers(client, queue, TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW):
            return
        routed, unrouted = await deployments_polling(client, queue)
    except RPCError:
        return  # a server that cannot describe the queue says nothing about its workers
    if routed:
        return
    if not unrouted:
        print(
            f"tempi: no worker polls task queue {queue} on {address}, so a session waits "
            f"until one does: start `tempi worker` where the projects and keys are, or set "
            f"{CLIENT_WORKER_ENV}=1 to run one in this process (it then also runs other users' sessions).",
            file=sys.stderr,
        )
    else:
        names = ", ".join(unrouted)
        print(
            f"tempi: the workers polling task queue {queue} on {address} belong to Worker Deployment "
            f"{names}, which has no current build, so a new session waits until one is made current: "
            f"`temporal worker deployment set-current-version --deployment-name {unrouted[0]} "
            f'--build-id BUILD --yes` (docs/operations.md, "Upgrading workers").',
            file=sys.stderr,
        )
