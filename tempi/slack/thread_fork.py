"""A thread under one of the bot's own top-level messages (its answer in a DM, an event's
report) continues the conversation that message came from: the thread's session starts as
a fork of that conversation's pi file, so the thread's first run knows what was said."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from tempi.client.forking import fork_session_file
from tempi.store.session_store import SessionStore


def fork_into_thread(source: Path, thread_file: Path) -> bool:
    """Make `thread_file` a fork of `source`'s current branch (its header naming `source` as
    parent) unless it exists already; True when this call made it. Safe against several
    gateways handling the same reply: the file appears whole, once."""
    if thread_file.exists() or not source.exists():
        return False
    store = SessionStore(source.parent)
    loaded = store.load(source)
    thread_file.parent.mkdir(parents=True, exist_ok=True)
    fork = fork_session_file(store, source, loaded.tree.leaf_id, session_dir=thread_file.parent)
    try:
        os.link(fork, thread_file)  # fails if another gateway's fork got there first
        return True
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            fork.unlink()
