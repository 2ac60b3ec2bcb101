"""How long a session waits for a prompt before it closes: `sessionIdleCloseMinutes` in
settings.json, or `TEMPI_SESSION_IDLE_CLOSE_MINUTES` (which wins, so an operator can set it
for every user of a shared cluster). Unset, a week, or 10 minutes for a `-p` run's session;
0, never.

A closed session has flushed its file and removed its sandbox container, and its workflow
no longer pins a worker build; `tempi --continue` / `--session` carry it on from its file.
"""

from __future__ import annotations

import math
import os

from tempi.config.errors import ConfigError
from tempi.config.settings import Settings

IDLE_CLOSE_ENV = "TEMPI_SESSION_IDLE_CLOSE_MINUTES"
# A `-p` run's session, unless told otherwise: long enough to attach, steer or continue it
# right after the run (as the console and `tempi attach` do), short enough that one-shot
# runs do not keep their workflows, sandbox containers and build pins for a week.
ONE_SHOT_IDLE_CLOSE_S = 10 * 60.0


def idle_close_seconds(settings: Settings, *, one_shot: bool = False) -> float | None:
    """The idle time in seconds for the session's config (None: the workflow's default).
    `one_shot`: the session is started by a print run (`-p`, `--mode json`)."""
    raw = os.environ.get(IDLE_CLOSE_ENV, "").strip()
    if not raw:
        minutes = settings.session_idle_close_minutes
        if minutes is None:
            return ONE_SHOT_IDLE_CLOSE_S if one_shot else None
        return minutes * 60
    try:
        minutes = float(raw)
    except ValueError:
        minutes = math.nan
    if not math.isfinite(minutes) or minutes < 0:
        raise ConfigError(
            f"{IDLE_CLOSE_ENV}={raw!r} is not a number of minutes: set it to e.g. 60 "
            "(a session idle that long closes), 0 (never close), or unset it (a week)."
        )
    return minutes * 60
