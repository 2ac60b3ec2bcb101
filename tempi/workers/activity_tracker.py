"""How long the service's workers have had nothing to do."""

from __future__ import annotations

import time
from typing import Any

from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor


class ActivityTracker(Interceptor):
    """Counts activities in flight so the service knows when it has been idle."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.last_change = time.monotonic()

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        tracker = self

        class _Inbound(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                tracker.in_flight += 1
                tracker.last_change = time.monotonic()
                try:
                    return await super().execute_activity(input)
                finally:
                    tracker.in_flight -= 1
                    tracker.last_change = time.monotonic()

        return _Inbound(next)

    def idle_for(self) -> float:
        return 0.0 if self.in_flight else time.monotonic() - self.last_change
