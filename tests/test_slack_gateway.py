"""`tempi slack` as a Slack user meets it: a real gateway process against the scripted
Slack server, a real Temporal dev server and the scripted model."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.slack_server import BotMessage, ScriptedSlackServer
from tempi.testing.slack_server.events import event_callback, user_message_events
from tempi.workers.worker import WORKFLOWS
from tempi.workers.workflow_runner import workflow_runner
from tempi.workflows.slack_types import conversation_workflow_id
from tests.conftest import tempi_env, write_models_json

pytestmark = pytest.mark.slow

SCENARIO = "slack-bash-then-answer"
ANSWER = "The command printed *hello-from-bash*."
THINKING = "_Thinking_ ..."


@pytest.fixture
async def slack() -> AsyncIterator[ScriptedSlackServer]:
    async with ScriptedSlackServer() as server:
        yield server


def bash_then_answer(command: str, answer: str) -> dict[str, Any]:
    return {
        "turns": [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": answer}]
    }


@pytest.fixture
def scenario() -> tuple[str, dict[str, Any]]:
    # The command also looks for the bot token: tools must not see it.
    return SCENARIO, bash_then_answer(
        "sleep 1.5; echo hello-from-bash ${MOM_SLACK_BOT_TOKEN:-no-token}", ANSWER
    )


@pytest.fixture
def gateway_args() -> list[str]:
    return ["--sandbox", "host"]  # mom's name for running tools on this machine


@contextlib.asynccontextmanager
async def running_gateway(
    slack: ScriptedSlackServer, tmp_path: Path, env: dict[str, str], workdir: Path, args: list[str]
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A `tempi slack` process, connected; stopped (if still running) on the way out."""
    log = (tmp_path / "gateway.log").open("a")
    opened = slack.connections_opened
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tempi", "slack", "--model", "mock/mock-model", *args, str(workdir),
        cwd=tmp_path, env=env, stdout=log, stderr=log,
    )  # fmt: skip
    try:
        await wait_for(lambda: slack.connections_opened > opened, "the gateway's Socket Mode connection")
        yield proc
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        log.close()


@pytest.fixture
def gateway_env(
    tmp_path: Path,
    temporal_address: str,
    scripted_server: ScriptedLLMServer,
    slack: ScriptedSlackServer,
    scenario: tuple[str, dict[str, Any]],
) -> dict[str, str]:
    name, turns = scenario
    scripted_server.add_scenario(name, turns)
    home = tmp_path / "home"
    write_models_json(home, scripted_server, name)
    return tempi_env(
        home,
        temporal_address,
        MOM_SLACK_APP_TOKEN=slack.app_token,
        MOM_SLACK_BOT_TOKEN=slack.bot_token,
        TEMPI_SLACK_API_URL=slack.api_url,
    )


@pytest.fixture
async def gateway(
    tmp_path: Path, slack: ScriptedSlackServer, gateway_env: dict[str, str], gateway_args: list[str]
) -> AsyncIterator[Path]:
    workdir = tmp_path / "mom"
    async with running_gateway(slack, tmp_path, gateway_env, workdir, gateway_args):
        yield workdir


async def wait_for(condition: Callable[[], bool], what: str, timeout: float = 90) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def assert_replays(client: Client, workdir: Path, channel: str, root_ts: str | None) -> None:
    """The conversation's history replays on the workflow code: a worker restarted after a
    deploy carries the conversation on."""
    handle = client.get_workflow_handle(conversation_workflow_id(str(workdir.resolve()), channel, root_ts))
    history = await handle.fetch_history()
    replayer = Replayer(
        workflows=WORKFLOWS,
        workflow_runner=workflow_runner(pydantic_data_converter),
        data_converter=pydantic_data_converter,
    )
    await replayer.replay_workflow(history)


def main_messages(slack: ScriptedSlackServer, channel: str) -> list[BotMessage]:
    return [m for m in slack.bot_messages(channel) if m.texts[0] == THINKING]


def finished(slack: ScriptedSlackServer, channel: str) -> bool:
    return any(m.text == ANSWER for m in main_messages(slack, channel))


async def test_a_mention_is_answered_in_one_message_edited_in_place(
    slack: ScriptedSlackServer, gateway: Path
) -> None:
    alice = slack.add_user("alice")
    general = slack.add_channel("general", members=[alice])
    asked = slack.user_says(alice, general, f"<@{slack.bot_user_id}> run the command please")

    await wait_for(lambda: finished(slack, general), "the final answer in the main message")

    [main] = main_messages(slack, general)
    assert main.thread_ts == asked  # thread mode: the answer is in the thread of the mention
    assert main.texts[0] == THINKING
    label = "sleep 1.5; echo hello-from-bash ${MOM_SLACK_BOT_TOKEN:-no-token}"
    assert any(f"_→ {label}_" in text for text in main.texts[1:-1]), main.texts
    assert main.text == ANSWER  # the final answer alone, in the same message
    details = [m for m in slack.bot_messages(general) if m.ts != main.ts and m.thread_ts == asked]
    assert any(re.match(rf"\*✓ bash\*: {re.escape(label)} \(\d+\.\ds\)", m.text) for m in details), [
        m.text for m in details
    ]
    assert any("*Result:*\n```hello-from-bash no-token" in m.text for m in details)
    assert not any(slack.bot_token in text for m in slack.bot_messages() for text in m.texts)

    # The conversation's session is a pi file where mom keeps it.
    context = gateway / general / "threads" / asked / "context.jsonl"
    lines = [json.loads(line) for line in context.read_text().splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["version"] == 3
    messages = [line["message"] for line in lines if line["type"] == "message"]
    user_text = (
        messages[0]["content"][0]["text"]
        if isinstance(messages[0]["content"], list)
        else messages[0]["content"]
    )
    assert re.fullmatch(
        r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[+-]\d\d:\d\d\] \[alice\]: run the command please", user_text
    ), user_text
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant"]

    # A channel message that does not mention the bot starts nothing.
    slack.user_says(alice, general, "just chatting, no bot needed")
    # The same event delivered again (twice) starts nothing new.
    original = slack.workspace.message(general, asked)
    assert original is not None
    for _ in range(2):
        for event in user_message_events(slack.workspace, original):
            slack.hub.publish(event_callback(slack.workspace, event))
    await slack.idle()
    await asyncio.sleep(3)
    assert len(main_messages(slack, general)) == 1
    assert sum(1 for m in slack.bot_messages(general) if m.text.startswith("_Already working")) == 0


async def test_a_dm_starts_a_run_and_an_unacked_envelope_starts_only_one(
    slack: ScriptedSlackServer, gateway: Path
) -> None:
    bob = slack.add_user("bob")
    dm = slack.open_dm(bob)
    # Every envelope times out before its ack can count, so Slack sends each event again.
    slack.hub.ack_timeout = 0.0
    slack.user_says(bob, dm, "please run the command")
    await slack.idle(timeout=30)
    slack.hub.ack_timeout = 3.0
    assert slack.redeliveries >= 1

    await wait_for(lambda: finished(slack, dm), "the final answer in the DM")
    await asyncio.sleep(2)
    [main] = main_messages(slack, dm)
    assert slack.acks >= 1
    # Even with --context thread (the default), a DM is one conversation: the answer at its
    # top level, tool details in its thread, one session file for the whole DM.
    assert main.thread_ts is None
    assert any(m.thread_ts == main.ts and m.text.startswith("*✓ bash*") for m in slack.bot_messages(dm))
    assert "[bob]: please run the command" in (gateway / dm / "context.jsonl").read_text()


SLOW = "slack-slow-bash"
SECOND_ANSWER = "Here is the second answer."


@pytest.mark.parametrize("scenario", [(SLOW, bash_then_answer("sleep 8; echo late", SECOND_ANSWER))])
async def test_busy_reply_then_stop_then_the_waiting_message_runs(
    slack: ScriptedSlackServer, gateway: Path, temporal_client: Client
) -> None:
    carol = slack.add_user("carol")
    ops = slack.add_channel("ops", members=[carol])
    bot = f"<@{slack.bot_user_id}>"
    asked = slack.user_says(carol, ops, f"{bot} start the long job")

    def working() -> bool:
        return any(any("_→ sleep 8; echo late_" in t for t in m.texts) for m in main_messages(slack, ops))

    await wait_for(working, "the tool label in the main message")
    slack.user_says(carol, ops, f"{bot} also check the logs", thread_ts=asked)
    await wait_for(
        lambda: any(
            m.text == "_Already working. Say `@mom stop` to cancel._" for m in slack.bot_messages(ops)
        ),
        "the busy reply",
    )
    slack.user_says(carol, ops, f"{bot} stop", thread_ts=asked)

    def stopping() -> list[BotMessage]:
        return [m for m in slack.bot_messages(ops) if m.texts[0] == "_Stopping..._"]

    await wait_for(
        lambda: any(m.text == "_Stopped_" for m in stopping()), "_Stopping..._ edited to _Stopped_"
    )
    [stop_reply] = stopping()
    assert stop_reply.thread_ts == asked

    # The message that waited runs next, in a main message of its own.
    await wait_for(lambda: any(m.text == SECOND_ANSWER for m in main_messages(slack, ops)), "the second run")
    first, second = main_messages(slack, ops)
    assert first.text != SECOND_ANSWER and second.text == SECOND_ANSWER
    context = gateway / ops / "threads" / asked / "context.jsonl"
    assert "[carol]: also check the logs" in context.read_text()
    await assert_replays(temporal_client, gateway, ops, asked)


@pytest.mark.parametrize("scenario", [(SLOW, bash_then_answer("sleep 8; echo late", SECOND_ANSWER))])
async def test_a_run_survives_the_gateway_being_killed(
    slack: ScriptedSlackServer, tmp_path: Path, gateway_env: dict[str, str], temporal_client: Client
) -> None:
    dave = slack.add_user("dave")
    dev = slack.add_channel("dev", members=[dave])
    workdir = tmp_path / "mom"
    async with running_gateway(slack, tmp_path, gateway_env, workdir, []) as first:
        asked = slack.user_says(dave, dev, f"<@{slack.bot_user_id}> start the long job")
        await wait_for(
            lambda: any(any("_→ sleep 8" in t for t in m.texts) for m in main_messages(slack, dev)),
            "the tool label",
        )
        first.kill()
        await first.wait()
    async with running_gateway(slack, tmp_path, gateway_env, workdir, []):
        await wait_for(
            lambda: any(m.text == SECOND_ANSWER for m in main_messages(slack, dev)),
            "the answer after the restart",
        )
    # The run carried on in its own message: nothing was posted twice.
    [main] = main_messages(slack, dev)
    assert main.thread_ts == asked
    assert not any(m.texts[0] == THINKING and m.ts != main.ts for m in slack.bot_messages(dev))
    await assert_replays(temporal_client, workdir, dev, asked)
