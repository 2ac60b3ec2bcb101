"""What clients read about a session from its file: messages in context, fork points, stats.

The workflow keeps only what it decides with; the conversation is in the session file,
so these are computed from the file at the workflow's current leaf.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tempi.agent.model_spec import ModelSpec
from tempi.agent.session_entries import MessageEntry
from tempi.store.errors import SessionFileError
from tempi.store.loading import LoadedSession
from tempi.store.session_store import SessionStore

# A leaf the workflow already moved to may reach the file a moment later (the flush
# after a run), so readers wait this long for it before using the file's own leaf.
LEAF_WAIT_S = 3.0
IMAGE_TOKENS = 1200


async def load_at_leaf(
    store: SessionStore, path: str, leaf_id: str | None
) -> tuple[LoadedSession | None, str | None]:
    """The loaded file and the leaf to read it at (None when nothing is written yet)."""
    waited = 0.0
    while True:
        try:
            loaded = store.load(Path(path))
        except SessionFileError:
            loaded = None
        if loaded is not None and (leaf_id is None or leaf_id in loaded.tree):
            return loaded, leaf_id or loaded.tree.leaf_id
        if waited >= LEAF_WAIT_S:
            return loaded, loaded.tree.leaf_id if loaded else None
        await asyncio.sleep(0.1)
        waited += 0.1


def context_messages(loaded: LoadedSession | None, leaf_id: str | None) -> list[dict[str, Any]]:
    if loaded is None or leaf_id is None:
        return []
    return [m.to_json_dict() for m in loaded.tree.build_context(leaf_id).messages]


def user_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def fork_points(loaded: LoadedSession | None) -> list[dict[str, str]]:
    """pi's get_fork_messages: every user message of the file that has text."""
    if loaded is None:
        return []
    points = []
    for entry in loaded.entries:
        if isinstance(entry, MessageEntry) and entry.message.role == "user":
            text = user_text(entry.message.to_json_dict())
            if text:
                points.append({"entryId": entry.id, "text": text})
    return points


def _estimate_tokens(message: dict[str, Any]) -> int:
    chars = 0
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "image":
            chars += IMAGE_TOKENS * 4
        else:
            chars += len(block.get("text") or block.get("thinking") or "")
            if block.get("type") == "toolCall":
                chars += len(block.get("name", "")) + len(json.dumps(block.get("arguments", {})))
    if isinstance(message.get("content"), str):
        chars += len(message["content"])
    for key in ("summary", "output", "command"):
        if isinstance(message.get(key), str):
            chars += len(message[key])
    return (chars + 3) // 4


def _usage_tokens(usage: dict[str, Any]) -> int:
    return int(usage.get("totalTokens") or 0) or sum(
        int(usage.get(k) or 0) for k in ("input", "output", "cacheRead", "cacheWrite")
    )


def context_usage(messages: list[dict[str, Any]], model: ModelSpec) -> dict[str, Any] | None:
    """Tokens in context: the last answer's usage plus an estimate of what came after it."""
    window = model.context_window
    if window <= 0:
        return None
    last = None
    for index in range(len(messages) - 1, -1, -1):
        m = messages[index]
        if (
            m.get("role") == "assistant"
            and m.get("stopReason") not in ("error", "aborted")
            and m.get("usage")
        ):
            last = index
            break
    if last is None:
        tokens = sum(_estimate_tokens(m) for m in messages)
    else:
        tokens = _usage_tokens(messages[last]["usage"]) + sum(
            _estimate_tokens(m) for m in messages[last + 1 :]
        )
    return {"tokens": tokens, "contextWindow": window, "percent": tokens / window * 100}


def session_stats(
    messages: list[dict[str, Any]], model: ModelSpec, session_file: str, session_id: str
) -> dict[str, Any]:
    """pi's get_session_stats, counted over the messages in context."""
    assistants = [m for m in messages if m.get("role") == "assistant"]
    totals = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    cost = 0.0
    for m in assistants:
        usage = m.get("usage") or {}
        for key in totals:
            totals[key] += int(usage.get(key) or 0)
        cost += float((usage.get("cost") or {}).get("total") or 0)
    stats: dict[str, Any] = {
        "sessionFile": session_file,
        "sessionId": session_id,
        "userMessages": sum(1 for m in messages if m.get("role") == "user"),
        "assistantMessages": len(assistants),
        "toolCalls": sum(
            1
            for m in assistants
            for b in m.get("content") or []
            if isinstance(b, dict) and b.get("type") == "toolCall"
        ),
        "toolResults": sum(1 for m in messages if m.get("role") == "toolResult"),
        "totalMessages": len(messages),
        "tokens": {**totals, "total": sum(totals.values())},
        "cost": cost,
    }
    usage = context_usage(messages, model)
    if usage is not None:
        stats["contextUsage"] = usage
    return stats
