"""Several `tempi slack` gateways on one working directory and one Temporal server, as the
issue promises: Slack hands each event to one of them, every mention is answered once, the
channel log holds each message once, and a gateway killed mid-run loses nothing: another
one finishes the run in the same main message."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tempi.activities.slack.channel_log import log_path, read_log
from tempi.testing.slack_server import ScriptedSlackServer
from tests import test_slack_gateway as base
from tests.test_slack_gateway import (
    ANSWER,
    THINKING,
    assert_replays,
    bash_then_answer,
    main_messages,
    running_gateway,
    wait_for,
)

pytestmark = pytest.mark.slow

# The gateway tests' fixtures: a scripted Slack server and real `tempi slack` processes.
slack = base.slack
gateway_env = base.gateway_env

SCENARIO = "slack-many-gateways"
PID_FILE = "tool.pid"
GATE = "gate"


@pytest.fixture
def scenario(tmp_path: Path) -> tuple[str, dict[str, Any]]:
    # The tool writes its shell's pid, so a test can tell which gateway runs it, then holds
    # the run until the test opens the gate.
    command = (
        f"echo $$ > {tmp_path / PID_FILE}; until [ -e {tmp_path / GATE} ]; do sleep 0.2; done; echo done"
    )
    return SCENARIO, bash_then_answer(command, ANSWER)


def labelled(slack: ScriptedSlackServer, channel: str, root: str | None) -> bool:
    """Whether the run for `root` shows its tool in its main message (it is mid-run)."""
    return any(
        any("_→ echo $$" in t for t in m.texts) for m in main_messages(slack, channel) if m.thread_ts == root
    )


def answered(slack: ScriptedSlackServer, channel: str, root: str | None) -> bool:
    return any(m.text == ANSWER for m in main_messages(slack, channel) if m.thread_ts == root)


def assert_each_run_posted_once(slack: ScriptedSlackServer, channel: str, roots: list[str | None]) -> None:
    mains = main_messages(slack, channel)
    assert Counter(m.thread_ts for m in mains) == Counter(roots), [(m.thread_ts, m.text) for m in mains]
    assert all(m.text == ANSWER for m in mains)
    # Every thread post appears once: no second gateway (or retried activity) posted it again.
    details = [(m.thread_ts, m.text) for m in slack.bot_messages(channel) if m.texts[0] != THINKING]
    assert len(details) == len(set(details)), details
    for main in mains:
        thread = main.thread_ts or main.ts
        done = [
            m
            for m in slack.bot_messages(channel)
            if m.thread_ts == thread and m.text.startswith(("*✓ bash*", "*✗ bash*"))
        ]
        assert len(done) == 1, [m.text for m in done]


def assert_logged_once(slack: ScriptedSlackServer, workdir: Path, channel: str, asked: list[str]) -> None:
    """log.jsonl holds each person's message once and each bot message as it ended, once."""
    lines = read_log(log_path(workdir, channel))
    people = Counter(line.ts for line in lines if not line.is_bot)
    assert all(people[ts] == 1 for ts in asked), people
    assert all(count == 1 for count in people.values()), people
    bot = [line for line in lines if line.is_bot]
    assert Counter((line.ts, line.text) for line in bot).most_common(1)[0][1] == 1
    finals = {m.ts: m.text for m in slack.bot_messages(channel)}
    # A line for a message still being edited (a half-posted answer) would be a stale copy.
    for line in bot:
        assert line.text == finals.get(line.ts) or not line.text.endswith(" ..."), line
    assert sorted(line.ts for line in bot if line.text == ANSWER) == sorted(
        m.ts for m in main_messages(slack, channel)
    )


async def test_two_gateways_answer_every_mention_once_and_log_every_message_once(
    slack: ScriptedSlackServer, tmp_path: Path, gateway_env: dict[str, str], temporal_client: Client
) -> None:
    alice, bob, carol = (slack.add_user(name) for name in ("alice", "bob", "carol"))
    general = slack.add_channel("general", members=[alice, bob, carol])
    ops = slack.add_channel("ops", members=[alice, bob, carol])
    dm = slack.open_dm(bob)
    bot = f"<@{slack.bot_user_id}>"
    workdir = tmp_path / "mom"
    asked: dict[str, list[str]] = {general: [], ops: [], dm: []}
    roots: dict[str, list[str | None]] = {general: [], ops: [], dm: []}

    async with running_gateway(slack, tmp_path, gateway_env, workdir, []):
        first = slack.connections_opened
        asked[general].append(slack.user_says(alice, general, f"{bot} run the command"))
        roots[general].append(asked[general][-1])
        asked[dm].append(slack.user_says(bob, dm, "run the command for me"))
        roots[dm].append(None)  # a DM's answer is at its top level, in Slack's history
        await wait_for(lambda: labelled(slack, dm, None), "the DM's run under way")

        # The second gateway backfills the DM's log while its run is still editing the answer.
        async with running_gateway(slack, tmp_path, gateway_env, workdir, []):
            second = slack.connections_opened
            assert slack.hub.open_connections == 2
            since = len(slack.deliveries)
            assert not answered(slack, dm, None)  # the second gateway's backfill saw it mid-run
            (tmp_path / GATE).touch()

            def mentions_reached() -> set[int]:
                return {d.connection for d in slack.deliveries[since:] if d.event_type == "app_mention"}

            # People keep talking until Slack has handed a mention to each gateway.
            people = [(carol, general), (bob, ops), (alice, ops), (carol, general)] * 3
            for user, channel in people:
                if mentions_reached() == {first, second}:
                    break
                asked[channel].append(slack.user_says(user, channel, f"{bot} run the command"))
                roots[channel].append(asked[channel][-1])
                slack.user_says(user, channel, "and a word not for the bot")
                await slack.idle()
            assert mentions_reached() == {first, second}

            for channel in (general, ops, dm):
                for root in roots[channel]:
                    await wait_for(
                        lambda c=channel, r=root: answered(slack, c, r), f"the answer in {channel}"
                    )
            await asyncio.sleep(2)  # a late duplicate would show up here

    for channel in (general, ops, dm):
        assert_each_run_posted_once(slack, channel, roots[channel])
        assert_logged_once(slack, workdir, channel, asked[channel])
    for channel in (general, ops):
        for root in roots[channel]:
            assert root is not None
            await assert_replays(temporal_client, workdir, channel, root)


def holder_of(pid: int, gateways: dict[int, asyncio.subprocess.Process]) -> asyncio.subprocess.Process:
    """The gateway process the tool's shell runs under."""
    while pid > 1:
        if pid in gateways:
            return gateways[pid]
        status = Path(f"/proc/{pid}/status").read_text()
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    raise AssertionError("the tool does not run under either gateway")


async def test_a_run_carries_on_when_the_gateway_running_its_tool_is_killed(
    slack: ScriptedSlackServer, tmp_path: Path, gateway_env: dict[str, str], temporal_client: Client
) -> None:
    erin = slack.add_user("erin")
    dev = slack.add_channel("dev", members=[erin])
    workdir = tmp_path / "mom"
    pid_file = tmp_path / PID_FILE
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(running_gateway(slack, tmp_path, gateway_env, workdir, []))
        b = await stack.enter_async_context(running_gateway(slack, tmp_path, gateway_env, workdir, []))
        asked = slack.user_says(erin, dev, f"<@{slack.bot_user_id}> run the command")
        await wait_for(lambda: labelled(slack, dev, asked) and pid_file.exists(), "the tool running")
        await wait_for(lambda: pid_file.read_text().strip().isdigit(), "the tool's pid")
        holder = holder_of(int(pid_file.read_text()), {a.pid: a, b.pid: b})
        other = b if holder is a else a

        os.kill(holder.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        await holder.wait()
        (tmp_path / GATE).touch()  # the dead gateway's orphaned tool ends too
        await wait_for(lambda: answered(slack, dev, asked), "the answer from the other gateway", timeout=120)
        took = time.monotonic() - killed_at
        print(f"kill to answer: {took:.1f}s")
        assert other.returncode is None  # the other gateway carried the run on; none restarted
        await asyncio.sleep(2)

    [main] = main_messages(slack, dev)  # the same main message, edited to the answer
    assert main.thread_ts == asked and main.text == ANSWER
    assert_each_run_posted_once(slack, dev, [asked])
    thread = [m.text for m in slack.bot_messages(dev) if m.thread_ts == asked and m.ts != main.ts]
    # The command is not run again behind the user's back: the run says it may not have finished.
    assert any(
        text.startswith("*✗ bash*") and "stopped before it reported back" in text for text in thread
    ), thread
    await assert_replays(temporal_client, workdir, dev, asked)
