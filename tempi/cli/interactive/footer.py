"""The two lines under the editor: where, which session, and pi's stats line: the tokens and
cost of every answer in the session file (all branches, as pi counts them), the context
used, and the model."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from prompt_toolkit.formatted_text import StyleAndTextTuples

from tempi.agent.model_spec import ModelSpec
from tempi.agent.session_entries import MessageEntry, SessionEntry
from tempi.agent.token_counts import short_tokens
from tempi.workflows.session_types import SessionStateView


@dataclass(frozen=True)
class AnswerUsage:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0

    @staticmethod
    def of(usage: dict[str, Any]) -> AnswerUsage:
        cost = usage.get("cost") or {}
        return AnswerUsage(
            int(usage.get("input") or 0),
            int(usage.get("output") or 0),
            int(usage.get("cacheRead") or 0),
            int(usage.get("cacheWrite") or 0),
            float(cost.get("total") or 0.0) if isinstance(cost, dict) else 0.0,
        )


def answer_key(message: dict[str, Any]) -> tuple[int, str]:
    """One answer, whether read from the file or from an event: its time and its model."""
    return int(message.get("timestamp") or 0), str(message.get("model") or "")


def answers_in(entries: Iterable[SessionEntry]) -> dict[tuple[int, str], AnswerUsage]:
    """The usage of every assistant message in the file, on every branch."""
    out: dict[tuple[int, str], AnswerUsage] = {}
    for entry in entries:
        if isinstance(entry, MessageEntry) and entry.message.role == "assistant":
            message = entry.message.to_json_dict()
            out[answer_key(message)] = AnswerUsage.of(message.get("usage") or {})
    return out


def usage_tokens(usage: dict[str, Any]) -> int:
    return int(usage.get("totalTokens") or 0) or sum(
        int(usage.get(k) or 0) for k in ("input", "output", "cacheRead", "cacheWrite")
    )


@dataclass
class FooterInfo:
    cwd: str
    model: ModelSpec
    thinking_level: str = "off"
    session_id: str = ""
    session_name: str | None = None
    # The checked-out git branch, shown after the directory as pi does (None: no repository).
    git_branch: str | None = None
    context_tokens: int | None = None
    auto_compaction: bool = True
    # Answers in the session file, and answers seen in events that the file may not hold
    # yet (it is written between turns); one answer counts once, so every terminal that
    # reads the same file and events shows the same totals.
    file_answers: dict[tuple[int, str], AnswerUsage] = field(default_factory=dict)
    live_answers: dict[tuple[int, str], AnswerUsage] = field(default_factory=dict)

    def update_from_state(self, state: SessionStateView) -> None:
        self.model = state.model
        self.thinking_level = state.thinking_level
        self.session_id = state.session_id
        self.session_name = state.session_name
        self.auto_compaction = state.auto_compaction_enabled

    def saw_answer(self, message: dict[str, Any]) -> None:
        if message.get("usage"):
            self.live_answers[answer_key(message)] = AnswerUsage.of(message["usage"])

    def totals(self) -> AnswerUsage:
        answers = {**self.live_answers, **self.file_answers}.values()
        return AnswerUsage(
            sum(a.input for a in answers),
            sum(a.output for a in answers),
            sum(a.cache_read for a in answers),
            sum(a.cache_write for a in answers),
            sum(a.cost for a in answers),
        )

    def stats_text(self) -> str:
        """pi's stats: ↑input ↓output Rcache-read Wcache-write $cost context%/window (auto)."""
        total = self.totals()
        parts = [
            f"{mark}{short_tokens(count)}"
            for mark, count in (
                ("↑", total.input),
                ("↓", total.output),
                ("R", total.cache_read),
                ("W", total.cache_write),
            )
            if count
        ]
        if total.cost:
            parts.append(f"${total.cost:.3f}")
        window = self.model.context_window
        if self.context_tokens is None or window <= 0:
            context = f"?/{short_tokens(window)}"
        else:
            context = f"{self.context_tokens / window * 100:.1f}%/{short_tokens(window)}"
        parts.append(context + (" (auto)" if self.auto_compaction else ""))
        return " ".join(parts)

    def context_text(self) -> str:
        window = self.model.context_window
        if self.context_tokens is None:
            return f"ctx ?/{short_tokens(window)}" if window else "ctx ?"
        if window <= 0:
            return f"ctx {short_tokens(self.context_tokens)}"
        percent = self.context_tokens / window * 100
        return f"ctx {short_tokens(self.context_tokens)}/{short_tokens(window)} ({percent:.1f}%)"

    def lines(self, width: int) -> StyleAndTextTuples:
        home = os.path.expanduser("~")
        where = "~" + self.cwd[len(home) :] if home != "/" and self.cwd.startswith(home) else self.cwd
        session = self.session_name or (self.session_id[:8] if self.session_id else "new session")
        branch = f" ({self.git_branch})" if self.git_branch else ""
        first = f"{where}{branch} • {session}"
        left = self.stats_text()
        right = f"{self.model.provider}/{self.model.id} • thinking {self.thinking_level}"
        gap = max(2, width - len(left) - len(right))
        return [
            ("class:footer", first[:width] + "\n"),
            ("class:footer", left + " " * gap + right),
        ]
