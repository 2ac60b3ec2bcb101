"""Token, cost, duration and message counts of an exported session, for the whole tree
and for the branch on show. The page's script recounts the branch when the reader moves
to another one, with the same formats as here (`fmt_*` have twins in viewer.js)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any


@dataclass
class Stats:
    user: int = 0
    assistant: int = 0
    tool_calls: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0
    first_ms: int | None = None
    last_ms: int | None = None
    models: list[str] = field(default_factory=list)

    def add_time(self, ms: int) -> None:
        if ms <= 0:
            return
        self.first_ms = ms if self.first_ms is None else min(self.first_ms, ms)
        self.last_ms = ms if self.last_ms is None else max(self.last_ms, ms)

    def add_message(self, message: dict[str, Any]) -> None:
        role = message.get("role")
        if role == "user":
            self.user += 1
        if role != "assistant":
            return
        self.assistant += 1
        self.tool_calls += sum(
            1 for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "toolCall"
        )
        usage = message_usage(message)
        self.input += usage.input
        self.output += usage.output
        self.cache_read += usage.cache_read
        self.cache_write += usage.cache_write
        self.cost += usage.cost
        model = f"{message.get('provider', '')}/{message.get('model', '')}".strip("/")
        if model and model not in self.models:
            self.models.append(model)


@dataclass(frozen=True)
class MessageUsage:
    """An assistant message's tokens and cost; the page carries them as data attributes
    named by the keys of `as_data`."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0

    def as_data(self) -> dict[str, str]:
        return {
            "in": str(self.input),
            "out": str(self.output),
            "cr": str(self.cache_read),
            "cw": str(self.cache_write),
            "cost": repr(self.cost),
        }


def message_usage(message: dict[str, Any]) -> MessageUsage:
    usage = message.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    cost = usage.get("cost")
    cost = cost if isinstance(cost, dict) else {}

    def number(value: Any) -> float:
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0

    return MessageUsage(
        input=int(number(usage.get("input"))),
        output=int(number(usage.get("output"))),
        cache_read=int(number(usage.get("cacheRead"))),
        cache_write=int(number(usage.get("cacheWrite"))),
        cost=number(cost.get("total")),
    )


def fmt_int(n: int) -> str:
    return f"{n:,}"


def fmt_cost(cost: float) -> str:
    return f"${cost:.4f}"


def fmt_duration(first_ms: int | None, last_ms: int | None) -> str:
    if first_ms is None or last_ms is None:
        return "–"
    s = round((last_ms - first_ms) / 1000)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


_ROWS: tuple[tuple[str, str], ...] = (
    ("messages", "Messages (you / assistant)"),
    ("tools", "Tool calls"),
    ("in", "Input tokens"),
    ("out", "Output tokens"),
    ("cr", "Cache read tokens"),
    ("cw", "Cache write tokens"),
    ("cost", "Cost"),
    ("duration", "Duration"),
)


def _cells(s: Stats) -> dict[str, str]:
    return {
        "messages": f"{fmt_int(s.user)} / {fmt_int(s.assistant)}",
        "tools": fmt_int(s.tool_calls),
        "in": fmt_int(s.input),
        "out": fmt_int(s.output),
        "cr": fmt_int(s.cache_read),
        "cw": fmt_int(s.cache_write),
        "cost": fmt_cost(s.cost),
        "duration": fmt_duration(s.first_ms, s.last_ms),
    }


def stats_table(branch: Stats, session: Stats) -> str:
    b, t = _cells(branch), _cells(session)
    rows = "".join(
        f'<tr data-stat="{key}"><th>{label}</th><td class="branch">{b[key]}</td><td>{t[key]}</td></tr>'
        for key, label in _ROWS
    )
    models = ", ".join(session.models) or "–"
    return (
        '<table id="stats"><thead><tr><th></th><th>This branch</th><th>Whole session</th></tr></thead>'
        f'<tbody>{rows}<tr><th>Models</th><td colspan="2">{escape(models)}</td></tr></tbody></table>'
    )
