"""Issue 42, Slack event injection end to end: a real `tempi slack` against the scripted
Slack server, fed events whose channel or thread is a path and an event file whose
channelId is one. Nothing lands outside the working directory; the bot goes on answering."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.slack_server import ScriptedSlackServer
from tempi.testing.slack_server.events import event_callback
from tests import test_slack_gateway as base
from tests.test_slack_events import write_event
from tests.test_slack_gateway import main_messages, wait_for

pytestmark = pytest.mark.slow

slack = base.slack
gateway_env = base.gateway_env
gateway_args = base.gateway_args
gateway = base.gateway

ANSWERS = [f"Answer {i}" for i in range(1, 6)]


@pytest.fixture
def scenario() -> tuple[str, dict[str, Any]]:
    return "slack-injection", {"select": "sequential", "turns": [{"text": a} for a in ANSWERS]}


async def test_events_whose_channel_or_thread_is_a_path_write_nothing_outside_the_working_dir(
    slack: ScriptedSlackServer, gateway: Path, tmp_path: Path
) -> None:
    alice = slack.add_user("alice")
    general = slack.add_channel("general", members=[alice])
    bot = f"<@{slack.bot_user_id}>"
    asked = slack.user_says(alice, general, f"{bot} first")
    await wait_for(
        lambda: any(m.text == ANSWERS[0] for m in main_messages(slack, general)), "the first answer"
    )

    ws = slack.workspace
    mention = {"type": "app_mention", "user": alice, "text": f"{bot} run this", "event_ts": ws.clock.next()}
    crafted = [
        # A channel that is a path: its log and its session would be `<dir>/../escaped-channel/`.
        {**mention, "channel": "../escaped-channel", "ts": ws.clock.next()},
        # A thread that is a path: the session would be `<dir>/<channel>/threads/../../../escaped-thread/`.
        {**mention, "channel": general, "ts": ws.clock.next(), "thread_ts": "../../../escaped-thread"},
    ]
    for event in crafted:
        slack.hub.publish(event_callback(ws, event))
    # An event file the model wrote, naming a channel that is a path.
    dropped = write_event(
        gateway, "wake.json", {"type": "immediate", "channelId": "../escaped-event", "text": "go"}
    )
    await slack.idle()
    await wait_for(lambda: not dropped.exists(), "the event file's removal")

    # The bot goes on answering people.
    slack.user_says(alice, general, f"{bot} second", thread_ts=asked)
    await wait_for(
        lambda: any(m.text == ANSWERS[1] for m in main_messages(slack, general)), "the second answer"
    )
    await asyncio.sleep(1)

    assert sorted(p.name for p in tmp_path.iterdir() if "escaped" in p.name) == []
    assert not list(gateway.rglob("*escaped*"))
    assert [m.text for m in main_messages(slack, general)] == ANSWERS[:2]
    log = (tmp_path / "gateway.log").read_text()
    assert "ignoring a app_mention event: its channel '../escaped-channel' is not one Slack writes" in log
    assert "its thread_ts '../../../escaped-thread' is not one Slack writes" in log
    assert "deleting events/wake.json" in log and "channelId" in log
