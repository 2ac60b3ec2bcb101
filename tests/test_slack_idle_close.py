"""Issue 37, item 10: an idle conversation closes (its workflow and its session's), holding
nothing open, and the next message in its thread opens it again, continuing the session
from its file without bringing the channel's log twice. A real `tempi slack` process, the
scripted Slack server and the scripted model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.slack_server import ScriptedSlackServer
from tempi.workflows.slack_types import conversation_workflow_id
from tests import test_slack_gateway as base
from tests.test_slack_gateway import assert_replays, running_gateway, wait_for
from tests.test_slack_team import answered, answers

slack = base.slack
gateway_env = base.gateway_env

pytestmark = pytest.mark.slow

FIRST, SECOND = "Noted: pineapple.", "The word was pineapple."


async def closed(client: Client, workflow_id: str) -> bool:
    return (
        await client.get_workflow_handle(workflow_id).describe()
    ).status == WorkflowExecutionStatus.COMPLETED


@pytest.mark.parametrize("scenario", [("slack-idle-close", answers(FIRST, SECOND))])
async def test_an_idle_thread_closes_and_its_next_reply_continues_the_session(
    slack: ScriptedSlackServer,
    tmp_path: Path,
    gateway_env: dict[str, str],
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
) -> None:
    env = {**gateway_env, "TEMPI_SLACK_IDLE_CLOSE": "2"}
    alice = slack.add_user("alice")
    dev = slack.add_channel("dev", members=[alice])
    workdir = tmp_path / "mom"
    async with running_gateway(slack, tmp_path, env, workdir, []):
        asked = slack.user_says(alice, dev, f"<@{slack.bot_user_id}> remember the word pineapple")
        await wait_for(lambda: bool(answered(slack, dev, FIRST)), "the first answer")
        conversation = conversation_workflow_id(str(workdir.resolve()), dev, asked)
        context = workdir / dev / "threads" / asked / "context.jsonl"
        session = "session-" + json.loads(context.read_text().splitlines()[0])["id"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not (await closed(temporal_client, conversation) and await closed(temporal_client, session)):
            assert loop.time() < deadline, "the idle conversation never closed"
            await asyncio.sleep(0.2)

        slack.user_says(alice, dev, "what was the word?", thread_ts=asked)
        await wait_for(lambda: bool(answered(slack, dev, SECOND)), "the answer after the conversation closed")
    [second] = answered(slack, dev, SECOND)
    assert second.thread_ts == asked
    sent = json.dumps(scripted_server.requests_for("slack-idle-close")[1].body["messages"])
    # The session went on from its file: the first exchange is there, each line once.
    assert FIRST in sent and sent.count("remember the word pineapple") == 1, sent
    await assert_replays(temporal_client, workdir, dev, asked)
