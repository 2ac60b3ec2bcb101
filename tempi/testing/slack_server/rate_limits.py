"""429s on demand: "the next N calls of method M get 429 with Retry-After S"."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Limit:
    remaining: int
    retry_after: int


class RateLimits:
    def __init__(self) -> None:
        self._limits: dict[str, _Limit] = {}

    def limit(self, method: str, times: int = 1, retry_after: int = 1) -> None:
        # Whole seconds, as Slack sends them: slack_sdk's retry handler parses them with int().
        if retry_after < 0:
            raise ValueError("retry_after must be a whole number of seconds, 0 or more")
        self._limits[method] = _Limit(times, retry_after)

    def take(self, method: str) -> int | None:
        """The Retry-After seconds if this call of `method` is to be refused."""
        limit = self._limits.get(method)
        if limit is None or limit.remaining <= 0:
            return None
        limit.remaining -= 1
        return limit.retry_after
