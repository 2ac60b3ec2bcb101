"""The two lines under the editor: where, which session, and what the context costs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from prompt_toolkit.formatted_text import StyleAndTextTuples

from tempi.agent.model_spec import ModelSpec
from tempi.workflows.session_types import SessionStateView


def short_tokens(count: int) -> str:
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k".replace(".0k", "k")
    return f"{count / 1_000_000:.1f}M".replace(".0M", "M")


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
    cost: float = 0.0
    context_tokens: int | None = None

    def update_from_state(self, state: SessionStateView) -> None:
        self.model = state.model
        self.thinking_level = state.thinking_level
        self.session_id = state.session_id
        self.session_name = state.session_name
        self.cost = state.stats.usage.cost.total

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
        first = f"{where} • {session}"
        left = f"{self.context_text()}  ${self.cost:.3f}"
        right = f"{self.model.provider}/{self.model.id} • thinking {self.thinking_level}"
        gap = max(2, width - len(left) - len(right))
        return [
            ("class:footer", first[:width] + "\n"),
            ("class:footer", left + " " * gap + right),
        ]
