"""A session's events since an offset, boiled down to what a Slack message shows."""

from __future__ import annotations

import json
from typing import Any

from tempi.workflows.slack_types import RunProgress, ToolEnded, ToolStarted

LABEL_MAX = 80
DETAIL_MAX = 1_500
TEXT_MAX = 35_000


def tool_label(name: str, args: dict[str, Any]) -> str:
    """mom's tools carry a `label` for people; pi's do not, so one is made from the arguments."""
    label = args.get("label")
    if not isinstance(label, str) or not label.strip():
        subject = args.get("command") or args.get("path") or args.get("pattern") or ""
        label = f"{name} {subject}".strip() if not args.get("command") else str(subject)
    first = label.strip().splitlines()[0] if label.strip() else name
    return first if len(first) <= LABEL_MAX else first[: LABEL_MAX - 1] + "…"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n…"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    if isinstance(content, dict):
        return _text_of(content.get("content"))
    return ""


def summarize(
    events: list[dict[str, Any]], next_offset: int, labels: dict[str, tuple[str, str, str]]
) -> RunProgress:
    """`labels` maps call ids to (tool, label) across calls, as ends may come in a later page."""
    progress = RunProgress(next_offset=next_offset)
    for event in events:
        kind = event.get("type")
        if kind == "tool_execution_start":
            name = str(event.get("toolName", "tool"))
            args = event.get("args") or {}
            call_id = str(event.get("toolCallId", ""))
            label = tool_label(name, args)
            labels[call_id] = (name, label, tool_args(args))
            progress.started.append(ToolStarted(call_id=call_id, label=label))
        elif kind == "tool_execution_end":
            call_id = str(event.get("toolCallId", ""))
            name, label, args_text = labels.get(call_id, (str(event.get("toolName", "tool")), "", ""))
            progress.ended.append(
                ToolEnded(
                    call_id=call_id,
                    tool=name,
                    label=label,
                    is_error=bool(event.get("isError")),
                    args=args_text,
                    result=_clip(_text_of(event.get("result")), DETAIL_MAX),
                )
            )
        elif kind == "message_end":
            message = event.get("message") or {}
            if message.get("role") != "assistant":
                continue
            text = _clip(_text_of(message.get("content")), TEXT_MAX)
            reason = message.get("stopReason")
            if reason == "error":
                progress.error = str(message.get("errorMessage") or "the model call failed")
            elif reason == "aborted":
                progress.aborted = True
            if text.strip():
                progress.final_text = text
                has_calls = any(
                    isinstance(p, dict) and p.get("type") == "toolCall" for p in message.get("content") or []
                )
                if has_calls:
                    progress.texts.append(text)
        elif kind == "agent_end":
            progress.done = True
    return progress


def tool_args(args: dict[str, Any]) -> str:
    command = args.get("command")
    if isinstance(command, str):
        return _clip(command, DETAIL_MAX)
    return _clip(json.dumps(args, ensure_ascii=False, indent=1), DETAIL_MAX)
