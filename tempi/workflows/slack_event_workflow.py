"""One wake-up from mom's events directory. Temporal holds it, not the gateway: a one-shot is
this workflow started with a start delay, a periodic event is a Schedule that starts it, so a
wake-up set before a crash still fires after it."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from tempi.workflows.slack_types import SLACK_DELIVER_EVENT, SlackEventFire


@workflow.defn(name="SlackEventWorkflow")
class SlackEventWorkflow:
    @workflow.run
    async def run(self, fire: SlackEventFire) -> bool:
        """Hand the event to its channel's conversation; False when its file is gone or changed."""
        # The run id tells this firing from the schedule's others, and from a retried delivery not at all.
        firing = fire.model_copy(update={"fire_id": workflow.info().run_id})
        delivered: bool = await workflow.execute_activity(
            SLACK_DELIVER_EVENT,
            firing,
            result_type=bool,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)
            ),
        )
        return delivered
