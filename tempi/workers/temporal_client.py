"""Connecting to Temporal: the embedded dev server by default, or whatever TEMPORAL_ADDRESS names."""

from __future__ import annotations

import os

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import TLSConfig


class TemporalUnreachable(RuntimeError):
    pass


def configured_address() -> str | None:
    return os.environ.get("TEMPORAL_ADDRESS") or None


def namespace() -> str:
    return os.environ.get("TEMPORAL_NAMESPACE", "default")


async def connect(address: str) -> Client:
    api_key = os.environ.get("TEMPORAL_API_KEY") or None
    tls: bool | TLSConfig = False
    cert, key = os.environ.get("TEMPORAL_TLS_CERT"), os.environ.get("TEMPORAL_TLS_KEY")
    if cert and key:
        with open(cert, "rb") as c, open(key, "rb") as k:
            tls = TLSConfig(client_cert=c.read(), client_private_key=k.read())
    elif api_key or os.environ.get("TEMPORAL_TLS", "").lower() in ("1", "true"):
        tls = True
    try:
        return await Client.connect(
            address,
            namespace=namespace(),
            api_key=api_key,
            tls=tls,
            data_converter=pydantic_data_converter,
        )
    except RuntimeError as err:
        raise TemporalUnreachable(
            f"Cannot reach the Temporal server at {address} ({err}). Check TEMPORAL_ADDRESS, or unset it "
            "to use tempi's embedded server."
        ) from err
