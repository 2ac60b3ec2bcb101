"""5xx answers on demand: "the next N calls of method M fail with HTTP status S", as Slack
answers while it has an incident."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Outage:
    remaining: int
    status: int


class Outages:
    def __init__(self) -> None:
        self._outages: dict[str, _Outage] = {}

    def fail(self, method: str, times: int = 1, status: int = 503) -> None:
        if not 500 <= status <= 599:
            raise ValueError("an outage answers with a 5xx status")
        self._outages[method] = _Outage(times, status)

    def take(self, method: str) -> int | None:
        """The HTTP status if this call of `method` is to fail."""
        outage = self._outages.get(method)
        if outage is None or outage.remaining <= 0:
            return None
        outage.remaining -= 1
        return outage.status
