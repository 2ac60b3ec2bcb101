"""A session's events since an offset, boiled down to what a Slack message shows."""

from __future__ import annotations

import json
from typing import Any

from tempi.agent.tools.attach import ATTACH_TOOL
from tempi.workflows.slack_types import (
    FileUpload,
    RunProgress,
    RunUsage,
    ThreadCopy,
    ToolEnded,
    ToolStarted,
)

LABEL_MAX = 80
DETAIL_MAX = 1_500
TEXT_MAX = 35_000
# mom's `_Error: ..._` line for a failed tool call shows this much of its result.
ERROR_MAX = 200
# An answer reaches Slack whole, split over messages; this only keeps one result well inside
# Temporal's payload limit.
ANSWER_MAX = 400_000
# What the session's auto_retry_end says when a stop ended the wait before a retry.
RETRY_CANCELLED = "Retry cancelled"


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
    events: list[dict[str, Any]],
    next_offset: int,
    labels: dict[str, tuple[str, str, str]],
    seen_at: list[float] | None = None,
) -> RunProgress:
    """`labels` maps call ids to (tool, label) across calls, as ends may come in a later page;
    `seen_at` says when each event was first seen (a Unix time): a tool's end, to time it."""
    progress = RunProgress(next_offset=next_offset)
    started_ms: dict[str, int] = {}
    ended_at: dict[str, float] = {}
    for index, event in enumerate(events):
        kind = event.get("type")
        if kind == "tool_execution_start":
            name = str(event.get("toolName", "tool"))
            args = event.get("args") or {}
            call_id = str(event.get("toolCallId", ""))
            label = tool_label(name, args)
            labels[call_id] = (name, label, tool_args(args))
            progress.started.append(ToolStarted(call_id=call_id, label=label, args=labels[call_id][2]))
            progress.lines.append(f"_→ {label}_")
        elif kind == "tool_execution_end":
            call_id = str(event.get("toolCallId", ""))
            name, label, args_text = labels.get(call_id, (str(event.get("toolName", "tool")), "", ""))
            result = _text_of(event.get("result"))
            if seen_at is not None and index < len(seen_at):
                ended_at[call_id] = seen_at[index]
            progress.ended.append(
                ToolEnded(
                    call_id=call_id,
                    tool=name,
                    label=label,
                    is_error=bool(event.get("isError")),
                    args=args_text,
                    result=_clip(result, DETAIL_MAX),
                    upload=None if event.get("isError") else _upload(name, event.get("result")),
                )
            )
            if event.get("isError"):
                # mom echoes a failed call in the main message.
                progress.lines.append(f"_Error: {_one_line(result)[:ERROR_MAX]}_")
        elif kind == "message_end":
            message = event.get("message") or {}
            if message.get("role") == "toolResult" and isinstance(message.get("timestamp"), int):
                # A tool's result is stamped with the session's time when the tool began.
                started_ms[str(message.get("toolCallId", ""))] = message["timestamp"]
            if message.get("role") != "assistant":
                continue
            _assistant_end(progress, message)
        elif kind == "agent_end":
            progress.done = True
        elif kind == "agent_start":
            progress.done = False
        elif kind == "auto_retry_start":
            # The failed call is asked again: its error is not the run's end.
            progress.error, progress.done = None, False
            _notice(progress, f"_Retrying ({event.get('attempt')}/{event.get('maxAttempts')})..._")
        elif kind == "auto_retry_end" and not event.get("success"):
            # No agent_end follows: the last attempt's came before, or a stop cut the wait.
            progress.done = True
            progress.aborted = progress.aborted or event.get("finalError") == RETRY_CANCELLED
            progress.error = str(event.get("finalError") or progress.error or "the model call failed")
        elif kind == "compaction_start":
            # A threshold compaction follows the run's agent_end; the run is over once it is.
            progress.done = False
            _notice(progress, "_Compacting context..._")
        elif kind == "compaction_end":
            _compaction_end(progress, event)
    for ended in progress.ended:
        began, end = started_ms.get(ended.call_id), ended_at.get(ended.call_id)
        if began is not None and end is not None:
            ended.seconds = max(end - began / 1000, 0.0)
    return progress


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _notice(progress: RunProgress, text: str) -> None:
    progress.copies.append(ThreadCopy(text=text, after_tools=len(progress.ended)))


def _compaction_end(progress: RunProgress, event: dict[str, Any]) -> None:
    if event.get("reason") == "threshold":
        progress.done = True
    elif event.get("reason") == "overflow":
        if event.get("willRetry"):
            progress.error = None
        else:
            # No new call follows a failed recovery: the run ended with the overflow.
            progress.done = True
            progress.error = str(event.get("errorMessage") or progress.error or "the context overflowed")


def tool_args(args: dict[str, Any]) -> str:
    command = args.get("command")
    if isinstance(command, str):
        return _clip(command, DETAIL_MAX)
    # The label already heads the detail line.
    shown = {key: value for key, value in args.items() if key != "label"}
    return _clip(json.dumps(shown, ensure_ascii=False, indent=1), DETAIL_MAX)


def _parts(content: Any, kind: str) -> list[str]:
    if not isinstance(content, list):
        return [content] if isinstance(content, str) and kind == "text" else []
    return [str(p.get(kind, "")) for p in content if isinstance(p, dict) and p.get("type") == kind]


def _usage(raw: Any) -> RunUsage:
    usage: dict[str, Any] = raw if isinstance(raw, dict) else {}
    raw_cost = usage.get("cost")
    cost: dict[str, Any] = raw_cost if isinstance(raw_cost, dict) else {}
    return RunUsage(
        input=int(usage.get("input") or 0),
        output=int(usage.get("output") or 0),
        cache_read=int(usage.get("cacheRead") or 0),
        cache_write=int(usage.get("cacheWrite") or 0),
        cost_input=float(cost.get("input") or 0),
        cost_output=float(cost.get("output") or 0),
        cost_cache_read=float(cost.get("cacheRead") or 0),
        cost_cache_write=float(cost.get("cacheWrite") or 0),
        cost_total=float(cost.get("total") or 0),
    )


def _assistant_end(progress: RunProgress, message: dict[str, Any]) -> None:
    content = message.get("content")
    reason = message.get("stopReason")
    if reason == "error":
        progress.error = str(message.get("errorMessage") or "the model call failed")
    elif reason == "aborted":
        progress.aborted = True
    used = _usage(message.get("usage"))
    progress.usage = progress.usage.add(used)
    if reason != "aborted":
        progress.context_tokens = used.input + used.output + used.cache_read + used.cache_write
    tools_so_far = len(progress.ended)
    for thinking in _parts(content, "thinking"):
        if thinking.strip():
            progress.thinking.append(_clip(thinking, TEXT_MAX))
            progress.lines.append(f"_{progress.thinking[-1]}_")
            progress.copies.append(ThreadCopy(text=f"_{thinking}_", after_tools=tools_so_far))
    text = "\n".join(_parts(content, "text"))
    if not text.strip():
        return
    text = _clip(text, ANSWER_MAX)
    progress.final_text = text
    progress.copies.append(ThreadCopy(text=text, after_tools=tools_so_far, is_text=True))
    if any(isinstance(p, dict) and p.get("type") == "toolCall" for p in content or []):
        progress.texts.append(_clip(text, TEXT_MAX))
        progress.lines.append(progress.texts[-1])


def _upload(tool: str, result: Any) -> FileUpload | None:
    if tool != ATTACH_TOOL or not isinstance(result, dict):
        return None
    details = result.get("details")
    if not isinstance(details, dict) or not isinstance(details.get("path"), str):
        return None
    return FileUpload(path=details["path"], title=str(details.get("title") or ""))
