"""Messages a user queued that an abort took back: shown so they are not lost, the way pi
puts them back in the editor."""

from __future__ import annotations

import sys

from tempi.workflows.activity_payloads import QueuedMessages


def editor_text(taken: QueuedMessages, current: str = "") -> str:
    """pi's restoreQueuedMessagesToEditor: the queued texts, then what was being typed,
    separated by blank lines."""
    return "\n\n".join(t for t in [*taken.all(), current] if t.strip())


def print_taken_back(taken: QueuedMessages) -> None:
    if not taken.all():
        return
    print(
        "tempi: run aborted. These queued messages were not sent; send them again if you still want them:",
        file=sys.stderr,
    )
    print(editor_text(taken), flush=True)
