"""Drawing the transcript again from the session, as pi rebuilds its chat (after Ctrl+O,
Ctrl+T or moving in the tree): what the terminal already scrolled past cannot be changed."""

from __future__ import annotations

import sys
from typing import Protocol

from tempi.cli.session_choice import OpenSession

# Home, clear the screen, then its scrollback (in this order, or tmux keeps the old screen).
CLEAR_ALL = "\x1b[H\x1b[2J\x1b[3J"


class Redrawable(Protocol):
    opened: OpenSession

    async def write_raw(self, text: str) -> None: ...

    async def use_session(self, opened: OpenSession, *, history: bool) -> None: ...


async def redraw(app: Redrawable) -> None:
    # Cleared under the running application, not beside it: its next erase then starts at
    # the top, so no copy of the editor stays above the transcript.
    sys.stdout.write(CLEAR_ALL)
    sys.stdout.flush()
    await app.use_session(app.opened, history=True)
    await app.write_raw("")  # the editor drawn whole again, below the transcript
