"""mom's events directory on Temporal, as a channel sees it: files in `<dir>/events/` wake
the bot at once, at a time (even across a gateway crash) or on a cron, until deleted."""

from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.worker import Replayer

from tempi.testing.slack_server import BotMessage, ScriptedSlackServer
from tempi.workers.worker import WORKFLOWS
from tempi.workers.workflow_runner import workflow_runner
from tempi.workflows.slack_types import conversation_workflow_id, event_id_prefix, event_workflow_id
from tests import test_slack_gateway as base
from tests.test_slack_gateway import running_gateway, wait_for

pytestmark = pytest.mark.slow

# The gateway tests' fixtures: a scripted Slack server and a real `tempi slack` process.
slack = base.slack
gateway_env = base.gateway_env
gateway_args = base.gateway_args
gateway = base.gateway

ANSWERS = [f"Event answer {i}" for i in range(1, 30)]


@pytest.fixture
def scenario() -> tuple[str, dict[str, Any]]:
    return "slack-events", {"select": "sequential", "turns": [{"text": a} for a in ANSWERS]}


def event_runs(slack: ScriptedSlackServer, channel: str, file: str) -> list[BotMessage]:
    return [m for m in slack.bot_messages(channel) if m.texts[0] == f"_Starting event: {file}_"]


def answered(slack: ScriptedSlackServer, channel: str, file: str) -> list[BotMessage]:
    return [m for m in event_runs(slack, channel, file) if m.text in ANSWERS]


async def assert_replays(client: Client, workdir: Path, channel: str) -> None:
    """The channel conversation the events ran in replays on the workflow code."""
    handle = client.get_workflow_handle(conversation_workflow_id(str(workdir.resolve()), channel, None))
    replayer = Replayer(
        workflows=WORKFLOWS,
        workflow_runner=workflow_runner(pydantic_data_converter),
        data_converter=pydantic_data_converter,
    )
    await replayer.replay_workflow(await handle.fetch_history())


def write_event(workdir: Path, name: str, body: dict[str, Any]) -> Path:
    events = workdir / "events"
    events.mkdir(parents=True, exist_ok=True)
    path = events / name
    tmp = events / f".{name}.tmp"
    tmp.write_text(json.dumps(body))
    tmp.rename(path)
    return path


async def test_immediate_and_one_shot_events_fire_and_a_wake_up_survives_a_gateway_crash(
    slack: ScriptedSlackServer, tmp_path: Path, gateway_env: dict[str, str], temporal_client: Client
) -> None:
    alice = slack.add_user("alice")
    general = slack.add_channel("general", members=[alice])
    workdir = tmp_path / "mom"
    async with running_gateway(slack, tmp_path, gateway_env, workdir, []) as first:
        now = write_event(
            workdir, "now.json", {"type": "immediate", "channelId": general, "text": "check CI"}
        )
        await wait_for(lambda: bool(answered(slack, general, "now.json")), "the immediate event's answer")
        [run] = event_runs(slack, general, "now.json")
        assert run.thread_ts is None  # events answer at the channel's top level
        assert not now.exists()  # queued, then deleted, as mom does

        at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=12)
        later = write_event(
            workdir,
            "later.json",
            {"type": "one-shot", "channelId": general, "text": "standup", "at": at.isoformat()},
        )
        handle = temporal_client.get_workflow_handle(event_workflow_id(str(workdir.resolve()), "later.json"))

        async def scheduled() -> bool:
            try:
                await handle.describe()
                return True
            except RPCError:
                return False

        for _ in range(100):
            if await scheduled():
                break
            await asyncio.sleep(0.1)
        first.kill()
        await first.wait()

    # Nothing runs the bot while the one-shot's time comes and goes.
    await asyncio.sleep((at - datetime.datetime.now(datetime.UTC)).total_seconds() + 2)
    assert event_runs(slack, general, "later.json") == []
    async with running_gateway(slack, tmp_path, gateway_env, workdir, []):
        await wait_for(lambda: bool(answered(slack, general, "later.json")), "the one-shot after the restart")
        await asyncio.sleep(3)
    assert len(event_runs(slack, general, "later.json")) == 1
    assert not later.exists()
    context = (workdir / general / "context.jsonl").read_text()
    assert "[EVENT]: [EVENT:now.json:immediate:immediate] check CI" in context
    assert f"[EVENT]: [EVENT:later.json:one-shot:{at.isoformat()}] standup" in context
    await assert_replays(temporal_client, workdir, general)


async def test_a_periodic_event_runs_from_a_temporal_schedule_until_its_file_is_deleted(
    slack: ScriptedSlackServer, gateway: Path, temporal_client: Client
) -> None:
    alice = slack.add_user("alice")
    ops = slack.add_channel("ops", members=[alice])
    # croner's six fields: seconds first.
    tick = write_event(
        gateway,
        "tick.json",
        {
            "type": "periodic",
            "channelId": ops,
            "text": "tick",
            "schedule": "*/4 * * * * *",
            "timezone": "Europe/Paris",
        },
    )
    await wait_for(lambda: len(answered(slack, ops, "tick.json")) >= 2, "two periodic runs")
    schedule = temporal_client.get_schedule_handle(event_workflow_id(str(gateway.resolve()), "tick.json"))
    described = await schedule.describe()
    assert described.schedule.spec.time_zone_name == "Europe/Paris"

    # An edit updates the schedule: later firings carry the new text.
    context = gateway / ops / "context.jsonl"
    write_event(
        gateway,
        "tick.json",
        {
            "type": "periodic",
            "channelId": ops,
            "text": "tock",
            "schedule": "*/4 * * * * *",
            "timezone": "UTC",
        },
    )
    await wait_for(
        lambda: "[EVENT:tick.json:periodic:*/4 * * * * *] tock" in context.read_text(), "the edited text"
    )
    assert (await schedule.describe()).schedule.spec.time_zone_name == "UTC"

    tick.unlink()

    async def schedule_gone() -> bool:
        try:
            await schedule.describe()
            return False
        except RPCError:
            return True

    for _ in range(100):
        if await schedule_gone():
            break
        await asyncio.sleep(0.1)
    assert await schedule_gone()
    await asyncio.sleep(6)  # a firing already queued may still finish
    settled = len(event_runs(slack, ops, "tick.json"))
    await asyncio.sleep(9)
    assert len(event_runs(slack, ops, "tick.json")) == settled
    await assert_replays(temporal_client, gateway, ops)


async def test_wake_ups_missed_while_no_gateway_ran_are_not_run_late(
    slack: ScriptedSlackServer, tmp_path: Path, gateway_env: dict[str, str], temporal_client: Client
) -> None:
    """mom's rule, past a grace for a restart: a one-shot whose time passed while no gateway
    ran is deleted unrun, a periodic event's missed firing is not caught up."""
    env = {**gateway_env, "TEMPI_SLACK_EVENT_GRACE": "2"}
    alice = slack.add_user("alice")
    general = slack.add_channel("general", members=[alice])
    workdir = tmp_path / "mom"
    scope = str(workdir.resolve())
    async with running_gateway(slack, tmp_path, env, workdir, []) as first:
        # Due once the gateway runs: one that takes longer to see the files than they have
        # left rightly deletes the one-shot as past (a loaded machine took over 5 s).
        due = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=8)).replace(microsecond=0)
        once = write_event(
            workdir,
            "once.json",
            {"type": "one-shot", "channelId": general, "text": "ping", "at": due.isoformat()},
        )
        cron = f"{due.second} {due.minute} {due.hour} * * *"
        daily = write_event(
            workdir,
            "daily.json",
            {"type": "periodic", "channelId": general, "text": "report", "schedule": cron, "timezone": "UTC"},
        )

        async def scheduled() -> bool:
            try:
                await temporal_client.get_workflow_handle(event_workflow_id(scope, "once.json")).describe()
                await temporal_client.get_schedule_handle(event_workflow_id(scope, "daily.json")).describe()
                return True
            except RPCError:
                return False

        deadline = asyncio.get_running_loop().time() + 30
        while not await scheduled():
            assert asyncio.get_running_loop().time() < deadline, (
                "never scheduled: " + (tmp_path / "gateway.log").read_text()
            )
            await asyncio.sleep(0.1)
        first.kill()
        await first.wait()

    # Both come due while no gateway runs, and the outage outlasts the grace.
    while datetime.datetime.now(datetime.UTC) < due + datetime.timedelta(seconds=4):
        await asyncio.sleep(0.2)
    async with running_gateway(slack, tmp_path, env, workdir, []):

        async def firings_done() -> int:
            query = 'WorkflowType = "SlackEventWorkflow" AND ExecutionStatus = "Completed"'
            done = 0
            async for execution in temporal_client.list_workflows(query):
                done += execution.id.startswith(event_id_prefix(scope))
            return done

        deadline = asyncio.get_running_loop().time() + 60
        while await firings_done() < 2:
            assert asyncio.get_running_loop().time() < deadline, "the missed firings never ran"
            await asyncio.sleep(0.2)
    assert event_runs(slack, general, "once.json") == [] and event_runs(slack, general, "daily.json") == []
    assert not once.exists()  # a past one-shot goes, as mom deletes it
    assert daily.exists()  # the periodic event waits for its next time
    log = (tmp_path / "gateway.log").read_text()
    assert "events/once.json: not run" in log and "events/daily.json: not run" in log
