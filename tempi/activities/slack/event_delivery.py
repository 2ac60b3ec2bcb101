"""Events-directory wake-ups into the channel's conversation workflow: the same
signal-with-start as a Slack message, from user `EVENT`."""

from __future__ import annotations

import datetime
import logging
import os
from pathlib import Path

from temporalio import activity
from temporalio.client import Client

from tempi.activities.slack.conversation_state import idle_close_seconds, with_saved_state
from tempi.slack.event_files import MAX_EVENT_FILE_BYTES, digest_of, event_prompt
from tempi.workflows.slack_types import (
    SLACK_DELIVER_EVENT,
    SlackConversationInput,
    SlackEventFire,
    SlackMessage,
    conversation_workflow_id,
    slack_task_queue,
)

log = logging.getLogger("tempi.slack.events")

EVENT_GRACE_ENV = "TEMPI_SLACK_EVENT_GRACE"
DEFAULT_EVENT_GRACE_S = 60


def events_dir(working_dir: str) -> Path:
    return Path(working_dir) / "events"


def _now_stamp() -> str:
    return datetime.datetime.now().astimezone().isoformat(sep=" ", timespec="seconds")


def file_digest_matches(fire: SlackEventFire) -> bool:
    """Whether the event's file still says what it said when it was scheduled (an edit
    reschedules, a delete cancels, even one made while no gateway watched)."""
    try:
        with (events_dir(fire.working_dir) / fire.file).open("rb") as handle:
            raw = handle.read(MAX_EVENT_FILE_BYTES + 1)
    except OSError:
        return False
    return digest_of(raw) == fire.digest


async def deliver_event(client: Client, fire: SlackEventFire) -> None:
    """Queue the event in its channel's conversation (events run at the channel's top level,
    behind any run in progress)."""
    msg = SlackMessage(
        channel=fire.channel,
        ts=f"event-{fire.fire_id}",
        user="EVENT",
        user_name="EVENT",
        text=event_prompt(fire.file, fire.kind, fire.detail, fire.text),
        is_dm=fire.channel.startswith("D"),
        stamp=_now_stamp(),
        event=fire.file,
    )
    inp = SlackConversationInput(
        working_dir=fire.working_dir,
        channel=fire.channel,
        context_mode="channel",
        bot_name=fire.bot_name,
        idle_close_s=idle_close_seconds(),
    )
    await client.start_workflow(
        "SlackConversationWorkflow",
        with_saved_state(inp),
        id=conversation_workflow_id(fire.working_dir, fire.channel, None),
        task_queue=slack_task_queue(fire.working_dir),
        start_signal="message",
        start_signal_args=[msg],
    )


def event_grace_s() -> float:
    """How late a wake-up may still run (a gateway restarting takes seconds); more, and it is
    skipped as mom skips what it missed."""
    raw = os.environ.get(EVENT_GRACE_ENV, "").strip()
    try:
        return float(raw) if raw else DEFAULT_EVENT_GRACE_S
    except ValueError:
        log.warning("%s=%r is not a number of seconds; using %d", EVENT_GRACE_ENV, raw, DEFAULT_EVENT_GRACE_S)
        return DEFAULT_EVENT_GRACE_S


@activity.defn(name=SLACK_DELIVER_EVENT)
async def deliver(fire: SlackEventFire) -> bool:
    if not file_digest_matches(fire):
        return False
    grace = event_grace_s()
    if fire.late_s is not None and fire.late_s > grace:
        # Missed while no gateway ran: mom neither catches up a periodic event nor runs a
        # past one-shot (whose file goes, as mom deletes it).
        what = "deleted" if fire.kind == "one-shot" else "its next time stands"
        log.warning(
            "events/%s: not run, %.0fs late (no gateway was running; more than %s=%.0f); %s",
            fire.file, fire.late_s, EVENT_GRACE_ENV, grace, what,
        )  # fmt: skip
        if fire.kind == "one-shot":
            (events_dir(fire.working_dir) / fire.file).unlink(missing_ok=True)
        return False
    await deliver_event(activity.client(), fire)
    if fire.kind == "one-shot":
        # mom deletes a one-shot once it is queued; a retry finds it gone and the signal already seen.
        (events_dir(fire.working_dir) / fire.file).unlink(missing_ok=True)
    return True
