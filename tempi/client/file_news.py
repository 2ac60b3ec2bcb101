"""Joining a running session whose file another program (pi) continued meanwhile: the
session moves to the file's latest entry at once, so what a front end shows (the
transcript, get_messages) is already the conversation the next prompt continues."""

from __future__ import annotations

from tempi.client.errors import SessionRefused
from tempi.client.session import SessionClient
from tempi.store.known_end import take_in, unaccounted_lines
from tempi.workflows.session_types import SessionStateView


async def take_in_file_news(session: SessionClient, state: SessionStateView) -> None:
    if state.is_streaming:
        return  # a run stops by itself when it finds the file changed under it
    news = unaccounted_lines(state.session_file, state.session_id)
    if not news or news[-1].entry_id == state.leaf_id:
        return
    latest = news[-1]
    try:
        await session.navigate(latest.entry_id, latest.entry_id)
    except SessionRefused:
        return  # a run started meanwhile: its first write takes the news in instead
    take_in(state.session_file, state.session_id, latest)
