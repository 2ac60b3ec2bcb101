"""The history bell (tempi/client/history_bell.py) on a real dev server: its state moves when
a workflow task completes, follows the workflow into its next run and into a run that reopens
it after it closed, and its long poll ends once nobody holds it."""

from __future__ import annotations

import asyncio
import gc
import uuid

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

from tempi.client.history_bell import HistoryBell, history_bell
from tempi.store.doorbell import BellState


@workflow.defn(sandboxed=False)
class Bells:
    def __init__(self) -> None:
        self.next = ""

    @workflow.run
    async def run(self, run: int) -> int:
        await workflow.wait_condition(lambda: self.next != "")
        if self.next == "again":
            workflow.continue_as_new(run + 1)
        return run

    @workflow.signal
    def poke(self) -> None:
        pass

    @workflow.signal
    def then(self, what: str) -> None:
        self.next = what


class Owner:
    """What holds a bell (an EventFollower in tempi)."""


async def _moved(bell: HistoryBell, since: BellState, *, new_run: bool = False) -> tuple[int, ...]:
    """The bell's next state (in another run than `since`'s, with `new_run`)."""
    async with asyncio.timeout(10):
        while True:
            state = bell.state()
            if state is not None and state != since and not (new_run and since and state[1] == since[1]):
                return state
            await asyncio.sleep(0.01)


async def test_the_bell_moves_with_each_completed_task_across_runs(temporal_client: Client) -> None:
    queue, workflow_id = f"bells-{uuid.uuid4().hex[:8]}", f"bells-{uuid.uuid4().hex[:8]}"
    async with Worker(temporal_client, task_queue=queue, workflows=[Bells]):
        await temporal_client.start_workflow(Bells.run, 0, id=workflow_id, task_queue=queue)
        handle = temporal_client.get_workflow_handle(workflow_id)
        owner = Owner()
        bell, _ = history_bell(temporal_client, workflow_id, owner)
        first = await _moved(bell, None)
        assert first[0] == 0

        await handle.signal(Bells.poke)
        poked = await _moved(bell, first)
        assert poked[1] == first[1] and poked[2] > first[2]  # a later task of the same run
        await asyncio.sleep(0.3)
        assert bell.state() == poked  # nothing new, nothing moved

        await handle.signal(Bells.then, "again")
        continued = await _moved(bell, poked, new_run=True)

        await handle.signal(Bells.then, "end")
        closed = await _moved(bell, continued)
        assert closed[1] == continued[1]
        reopened_run = await temporal_client.start_workflow(Bells.run, 10, id=workflow_id, task_queue=queue)
        await _moved(bell, closed, new_run=True)

        # Another holder in this process shares the one long poll; the last to go ends it.
        other = Owner()
        assert history_bell(temporal_client, workflow_id, other)[0] is bell
        del owner
        gc.collect()
        assert bell.users == 1 and bell._task is not None
        del other
        gc.collect()
        assert bell.users == 0 and bell._task is None
        await reopened_run.signal(Bells.then, "end")
