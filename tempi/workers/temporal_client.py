"""Connecting to Temporal: the embedded dev server by default, or the server the connection
settings name (TEMPORAL_ADDRESS, a temporal.toml profile)."""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import Awaitable, Callable

from temporalio.client import Client
from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError, RPCStatusCode

from tempi.workers.codec import data_converter, load_key_ring
from tempi.workers.telemetry import tracing_interceptors
from tempi.workers.temporal_connection import DEFAULT_NAMESPACE, load_settings

# Where a client process's Temporal core logs go: nowhere a person sees. The core retries a
# lost connection on its own and logs each retry as a WARN line on stderr, which would
# scroll over the terminal a front end draws; the front ends say "lost the server" once.
CORE_LOGGER = logging.getLogger("tempi.temporal_core")


class TemporalUnreachable(RuntimeError):
    pass


# What the frontend answers while the server behind it is still starting.
STARTING_SERVER = "not healthy yet"
STARTING_GRACE_S = 30.0


def quiet_core_logs() -> None:
    """Send this process's Temporal core logs to CORE_LOGGER instead of stderr.

    Call before the first client is made (the SDK makes its default runtime then). Workers
    keep the SDK's default, so the service's log file still has them."""
    CORE_LOGGER.addHandler(logging.NullHandler())
    CORE_LOGGER.propagate = False
    runtime = Runtime(
        telemetry=TelemetryConfig(
            logging=LoggingConfig(
                filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                forwarding=LogForwardingConfig(logger=CORE_LOGGER),
            )
        )
    )
    Runtime.set_default(runtime, error_if_already_set=False)


def server_gone(err: RPCError) -> bool:
    """The server did not answer at all (as opposed to answering with an error). A server
    killed while a call is in flight fails it as UNKNOWN "transport error" (the gRPC
    transport's own failure, not the server's answer)."""
    if err.status == RPCStatusCode.UNKNOWN and err.message.startswith("transport error"):
        return True
    return err.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)


def configured_address() -> str | None:
    """The Temporal server the settings name, or None for tempi's embedded one."""
    return load_settings().address


async def connect(address: str) -> Client:
    """A client of the server at `address`, with the namespace, credentials, TLS and
    metadata of the connection settings (tempi.workers.temporal_connection)."""
    if address.startswith("unix://"):
        return await _connect_unix(address)
    settings = load_settings()
    try:
        return await retry_while_starting(
            lambda: Client.connect(
                address,
                namespace=settings.namespace,
                api_key=settings.api_key,
                tls=settings.tls,
                rpc_metadata=settings.rpc_metadata,
                data_converter=data_converter(load_key_ring()),
                interceptors=tracing_interceptors(),
            )
        )
    except RuntimeError as err:
        reason = str(err).replace(settings.api_key, "<api key>") if settings.api_key else str(err)
        raise TemporalUnreachable(
            f"Cannot reach the Temporal server at {address} ({reason}). Check the Temporal connection "
            f"settings ({settings.origin}), or unset them to use tempi's embedded server."
        ) from err


async def retry_while_starting(attempt: Callable[[], Awaitable[Client]]) -> Client:
    """A server that has just opened its port may still be starting its frontend (seconds on
    a busy machine); it says so, and is worth waiting for rather than giving up on."""
    deadline = time.monotonic() + STARTING_GRACE_S
    while True:
        try:
            return await attempt()
        except RuntimeError as err:
            if STARTING_SERVER not in str(err) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.1)


async def _connect_unix(address: str) -> Client:
    """tempi's embedded server, through its owner-only Unix socket: no TLS, no API key (the
    socket's directory permissions are the access control)."""
    try:
        with warnings.catch_warnings():
            # The SDK warns that a target with a scheme may stop working in a later version;
            # the pinned one passes `unix://` to its gRPC transport, which supports it, and
            # tests/test_embedded_service.py fails first if an upgrade drops that.
            warnings.filterwarnings("ignore", message="Target host as URL with scheme")
            return await retry_while_starting(
                lambda: Client.connect(
                    address,
                    namespace=DEFAULT_NAMESPACE,
                    data_converter=data_converter(load_key_ring()),
                    interceptors=tracing_interceptors(),
                )
            )
    except RuntimeError as err:
        raise TemporalUnreachable(
            f"Cannot reach tempi's background server at {address} ({err}). `tempi server stop` "
            "and try again; its log is in the tempi home's logs/ directory."
        ) from err
