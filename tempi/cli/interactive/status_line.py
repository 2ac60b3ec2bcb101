"""The status line above the editor: a passing message, else what is going on (the server
gone, a shell command running, the agent working) and the keys that act on it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prompt_toolkit.formatted_text import StyleAndTextTuples

if TYPE_CHECKING:
    from tempi.cli.interactive.app import InteractiveApp

STATUS_SHOWN_S = 4.0
# Statuses that say something is under way: gone as soon as it is done.
ABORTING_TEXT = "Aborting…"
CANCELLING_TEXT = "Cancelling the command…"
STARTING_SERVER_TEXT = "Starting the tempi server again…"


def status_text(app: InteractiveApp) -> StyleAndTextTuples:
    if app.status and time.monotonic() - app.status_at < STATUS_SHOWN_S:
        return [("class:status", app.status)]
    if app.link.lost:
        again = " · your next message starts it again" if app.link.can_restart else ""
        return [("class:status", f"no server · reconnecting…{again} · Ctrl+C twice quits")]
    if app.bash_running is not None:
        return [("class:hint", f"running !{app.bash_running} … esc cancels")]
    if app.view.streaming:
        return [("class:hint", "esc abort · enter steer · alt+enter follow-up")]
    return []
