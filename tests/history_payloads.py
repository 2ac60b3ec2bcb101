"""The payloads of a Temporal history, decoded: what a test searches to prove a secret never
entered workflow history, and which tools ran as local activities."""

from __future__ import annotations

import base64
import json
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent


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


def local_activity_tools(history_events: list[HistoryEvent]) -> list[str]:
    """The tool of every local activity the history recorded, in order."""
    names = []
    for event in history_events:
        if event.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
            continue
        attrs = event.marker_recorded_event_attributes
        if attrs.marker_name != "core_local_activity" or "result" not in attrs.details:
            continue
        result = json.loads(attrs.details["result"].payloads[0].data)
        brief = result.get("result")  # run_tool_briefly's answer wraps the tool's
        names.append((brief or result)["message"]["toolName"])
    return names
