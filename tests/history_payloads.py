"""The payloads of a Temporal history, decoded: what a test searches to prove a secret never
entered workflow history."""

from __future__ import annotations

import base64
from typing import Any


def payload_texts(node: Any) -> list[str]:
    """Every payload (`{"metadata": ..., "data": <base64>}`) in a history's JSON (an export, or
    `WorkflowHistory.to_json_dict()`), decoded; one that is not base64 is kept as it is."""
    out: list[str] = []
    _collect(node, out)
    return out


def _collect(node: Any, out: list[str]) -> None:
    if isinstance(node, dict):
        if "metadata" in node and isinstance(node.get("data"), str):
            try:
                out.append(base64.b64decode(node["data"]).decode("utf-8", "replace"))
            except ValueError:
                out.append(node["data"])
        for value in node.values():
            _collect(value, out)
    elif isinstance(node, list):
        for value in node:
            _collect(value, out)
