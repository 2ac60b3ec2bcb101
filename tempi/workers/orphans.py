"""Removing sandbox containers whose session is no longer running (a worker that died
before its session ended, a session terminated by an operator)."""

from __future__ import annotations

import logging

from temporalio.client import Client

log = logging.getLogger(__name__)

SESSION_PREFIX = "session-"


async def running_session_ids(client: Client) -> set[str]:
    ids = set()
    async for execution in client.list_workflows('ExecutionStatus = "Running"'):
        if execution.id.startswith(SESSION_PREFIX):
            ids.add(execution.id[len(SESSION_PREFIX) :])
    return ids


async def sweep_orphan_sandboxes(client: Client) -> list[str]:
    """Session ids whose containers were removed; nothing when no engine answers."""
    from tempi.activities.sandbox import remove_orphans

    try:
        live = await running_session_ids(client)
        return await remove_orphans(live)
    except Exception as err:  # a sweep is housekeeping: it must never stop a worker
        log.warning("orphan sandbox sweep skipped: %s", err)
        return []
