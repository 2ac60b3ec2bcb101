"""One wake-up from mom's events directory. Temporal holds it, not the gateway: a one-shot is
this workflow started with a start delay, a periodic event is a Schedule that starts it, so a
wake-up set before a crash still fires after it."""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from tempi.workflows.slack_types import SLACK_DELIVER_EVENT, SlackEventFire

# Patch: the firing says how late it runs, so one missed while no gateway ran is dropped.
EVENT_LATENESS = "slack-event-lateness"


@workflow.defn(name="SlackEventWorkflow")
class SlackEventWorkflow:
    @workflow.run
    async def run(self, fire: SlackEventFire) -> bool:
        """Hand the event to its channel's conversation; False when its file is gone or changed."""
        # The run id tells this firing from the schedule's others, and from a retried delivery not at all.
        firing = fire.model_copy(update={"fire_id": workflow.info().run_id})
        if workflow.patched(EVENT_LATENESS):
            firing.late_s = self._late_s(fire)
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

    @staticmethod
    def _late_s(fire: SlackEventFire) -> float | None:
        """Seconds between the firing's time and this run (its first task: a gateway's worker
        took it). A Schedule starts its workflow on time even with no worker, so a periodic
        firing's time is the workflow's start; a one-shot's is the time its file names."""
        if fire.kind == "periodic":
            due = workflow.info().workflow_start_time
        elif fire.kind == "one-shot" and fire.due_at:
            due = datetime.fromisoformat(fire.due_at)
        else:
            return None
        return max((workflow.now() - due).total_seconds(), 0.0)
