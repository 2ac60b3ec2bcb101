"""When a console's feed asks a session's worker for new log events.

Every ask is a query the worker answers, so a feed asks only when something is likely new:
when a file appears in the session's live directory (a model call or a command starts
writing: also how a run started elsewhere shows), once when a model's deltas stop (its
answer is likely complete), and soon after an ask that brought events (they come in
bursts). While deltas flow the log has nothing new for the page, so it is asked only now
and then; otherwise the asks back off to one every two seconds, as they are while idle.
Deltas and command output themselves are read from the live files, in the console's
process, as often as the feed polls. A feed that hears a bell (the workflow's doorbell, or
its history) does without the pacer: the bell says when the log may have moved."""

from __future__ import annotations

import os
from pathlib import Path

# Deltas that stopped this long ago mean the model's answer is likely over.
QUIET_S = 0.1
# While deltas flow: the log is asked this often all the same (a steer, a queued message).
STREAMING_ASK_S = 2.0
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 2.0
IDLE_ASK_S = 2.0


class LogPacer:
    def __init__(self, live_dir: Path | None) -> None:
        self.live_dir = live_dir
        self._files = self._listing()
        self._asked_at = float("-inf")
        self._delta_at = float("-inf")
        self._quiet_asked = True
        self._backoff = FIRST_BACKOFF_S

    def _listing(self) -> frozenset[str]:
        if self.live_dir is None:
            return frozenset()
        try:
            return frozenset(os.listdir(self.live_dir))
        except OSError:
            return frozenset()

    def should_ask(self, now: float, *, log_moved: bool, live_moved: bool, streaming: bool) -> bool:
        """Whether the next poll asks the log; `log_moved` and `live_moved` are what the
        last ask and the last poll found, `streaming` whether a run goes."""
        files = self._listing()
        # A file that goes (the next step started) tells little that the next new one does not.
        new_file, self._files = bool(files - self._files), files
        if live_moved:
            self._delta_at, self._quiet_asked = now, False
        if log_moved:
            # More of a burst comes soon, but seldom before the next look: one backoff on.
            self._backoff = FIRST_BACKOFF_S
        if new_file:
            ask, self._backoff = True, FIRST_BACKOFF_S
        elif not streaming:
            # Idle until a run starts: a prompt from this console wakes the feed, one sent
            # elsewhere shows by its first live file, anything else by this slow ask.
            ask = now - self._asked_at >= IDLE_ASK_S
        elif not self._quiet_asked and now - self._delta_at >= QUIET_S:
            ask = self._quiet_asked = True
        elif now - self._delta_at < QUIET_S:
            ask = now - self._asked_at >= STREAMING_ASK_S
        else:
            ask = now - self._asked_at >= self._backoff
            if ask:
                self._backoff = min(self._backoff * 2, MAX_BACKOFF_S)
        if ask:
            self._asked_at = now
        return ask

    def asked(self, now: float) -> None:
        """The feed asked on its own (a control sent from this console woke it)."""
        self._asked_at, self._backoff = now, FIRST_BACKOFF_S
