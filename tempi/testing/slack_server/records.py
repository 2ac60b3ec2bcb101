"""What tests read back: the Web API calls served and what the bot did to messages."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


class ApiCall(BaseModel):
    """One Web API request as served (tokens left out)."""

    method: str
    args: dict[str, Any]
    status: int
    error: str | None = None
    at: float


class BotAction(BaseModel):
    """One thing the bot did to a message, in order: posted, edited, deleted, shared a file."""

    kind: Literal["post", "update", "delete", "file_share"]
    channel: str
    ts: str
    thread_ts: str | None = None
    text: str = ""
    at: float


class BotMessage(BaseModel):
    """A message the bot posted, with every text it had: `texts[-1]` is what users see now."""

    channel: str
    ts: str
    thread_ts: str | None = None
    texts: list[str]
    deleted: bool
    file_ids: list[str] = []

    @property
    def text(self) -> str:
        return self.texts[-1]
