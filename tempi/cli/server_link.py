"""A front end's view of its Temporal server: lost, and back again, each said once.

The SDK's client reconnects by itself once the server answers again (the background
service always listens on the same Unix socket of the tempi home), so a front end only
has to stop asking while the server is gone and say what is going on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from temporalio.service import RPCError

from tempi.client.events import EventFollower
from tempi.config.paths import tempi_home
from tempi.workers.service import ensure_service, read_info
from tempi.workers.temporal_client import server_gone

LOST_TEXT = (
    "Lost the tempi server; reconnecting… (the session is kept; `tempi server start` or any tempi "
    "command starts the server again)"
)
BACK_TEXT = "Reconnected to the tempi server."
NOT_SENT_TEXT = (
    "Not sent: the Temporal server does not answer. It is back in the editor; send it again once reconnected."
)
CHECK_INTERVAL_S = 1.0
# How long a message waits for the background server it started again to answer.
RESTART_WAIT_S = 90.0


class ServerLink:
    def __init__(
        self, server_up: Callable[[], bool] | None = None, start_server: Callable[[], object] | None = None
    ) -> None:
        # Embedded service: whether it runs, asked locally and cheaply. Elsewhere unknown,
        # so the next RPC is the only way to find out.
        self._server_up = server_up
        # Embedded service: starts it again (blocking). Elsewhere the server is someone else's.
        self._start_server = start_server
        self.lost = False

    @property
    def can_restart(self) -> bool:
        return self._start_server is not None

    async def bring_back(self) -> bool:
        """Start the background server again and wait until a call gets through (the SDK's
        client reconnects by itself); False when it still does not answer."""
        assert self._start_server is not None, "only the background server is started from here"
        await asyncio.to_thread(self._start_server)
        deadline = asyncio.get_running_loop().time() + RESTART_WAIT_S
        while self.lost and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)  # the front end's own polling notes the first answer
        return not self.lost

    def failed(self, err: RPCError) -> str | None:
        """Note a failed call; the text to show when this is news."""
        if not server_gone(err) or self.lost:
            return None
        self.lost = True
        return LOST_TEXT

    def answered(self) -> str | None:
        """Note a call that got through; the text to show when this is news."""
        if not self.lost:
            return None
        self.lost = False
        return BACK_TEXT

    async def wait_until_up(self) -> None:
        """While lost: return once the server may answer again (at once when unknown)."""
        if self._server_up is None:
            await asyncio.sleep(CHECK_INTERVAL_S)
            return
        while not await asyncio.to_thread(self._server_up):
            await asyncio.sleep(CHECK_INTERVAL_S)


def link_for(embedded: bool) -> ServerLink:
    if not embedded:
        return ServerLink()
    home = tempi_home()
    return ServerLink(lambda: read_info(home) is not None, lambda: ensure_service(home, quiet=True))


async def events_across_outages(
    follower: EventFollower, link: ServerLink, say: Callable[[str], None]
) -> AsyncIterator[dict[str, Any]]:
    """The follower's events for as long as the caller wants them, waiting out a server that
    went away; anything else the server answers with is raised."""
    async for batch in batches_across_outages(follower, link, say):
        for event in batch:
            yield event
        if not batch:
            await follower.wait_for_news()


async def batches_across_outages(
    follower: EventFollower, link: ServerLink, say: Callable[[str], None]
) -> AsyncIterator[list[dict[str, Any]]]:
    """Each poll's new events (an empty list when there are none), as events_across_outages
    waits out a lost server."""
    while True:
        try:
            batch = await follower.poll()
        except RPCError as err:
            news = link.failed(err)
            if not link.lost:
                raise
            if news is not None:
                say(news)
            await link.wait_until_up()
            await asyncio.sleep(CHECK_INTERVAL_S / 2)  # the server may be up before its worker
            continue
        news = link.answered()
        if news is not None:
            say(news)
        yield batch
