"""Issue 37, items 5, 8 and 11: what a run shows in a thread. One answer, the tool details
folded into one message of the run; lines in the order they happened, a failed call echoed
in the main message, tool times as the tools took; a tool's entry keeps its label and
arguments when the gateway was restarted while it ran. A real `tempi slack` process, the
scripted Slack server and the scripted model."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tempi.testing.slack_server import BotMessage, ScriptedSlackServer
from tests import test_slack_gateway as base
from tests.test_slack_gateway import THINKING, assert_replays, running_gateway, wait_for

slack = base.slack
gateway_env = base.gateway_env
gateway_args = base.gateway_args
gateway = base.gateway

pytestmark = pytest.mark.slow

ANSWER = "All counted: *3 files*."
MISSING = "ls /nonexistent-tempi-dir"
COUNT = "sleep 1.5; echo counted"


def bash(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


def in_thread(slack: ScriptedSlackServer, channel: str, root: str) -> list[BotMessage]:
    return [m for m in slack.bot_messages(channel) if m.thread_ts == root]


def main_message(slack: ScriptedSlackServer, channel: str, root: str) -> BotMessage | None:
    return next((m for m in in_thread(slack, channel, root) if m.texts[0] == THINKING), None)


def answered(slack: ScriptedSlackServer, channel: str, root: str) -> bool:
    main = main_message(slack, channel, root)
    return main is not None and main.text == ANSWER


@pytest.mark.parametrize(
    "scenario",
    [
        (
            "slack-run-display",
            {
                "turns": [
                    {"text": "First I look.", "tool_calls": [bash(MISSING)]},
                    {"tool_calls": [bash(COUNT)]},
                    {"text": ANSWER},
                ]
            },
        )
    ],
)
async def test_a_thread_gets_one_answer_and_one_details_message_with_true_tool_times(
    slack: ScriptedSlackServer, gateway: Path, temporal_client: Client
) -> None:
    alice = slack.add_user("alice")
    dev = slack.add_channel("dev", members=[alice])
    asked = slack.user_says(alice, dev, f"<@{slack.bot_user_id}> count the files")
    await wait_for(lambda: answered(slack, dev, asked), "the answer")

    thread = in_thread(slack, dev, asked)
    main = main_message(slack, dev, asked)
    assert main is not None
    # Item 5: the answer once, and the run's details in one message under it.
    assert [m.text for m in thread].count(ANSWER) == 1, [m.text for m in thread]
    assert len(thread) == 2, [m.texts for m in thread]
    details = next(m for m in thread if m.ts != main.ts)
    assert details.ts > main.ts
    assert f"*✗ bash*: {MISSING}" in details.text and f"*✓ bash*: {COUNT}" in details.text
    # Item 11: what the main message showed came in order, the failed call echoed there.
    shown = "\n".join(main.texts)
    assert shown.index("First I look.") < shown.index(f"_→ {MISSING}_")
    assert re.search(r"_Error: ls: cannot access '?/nonexistent-tempi-dir", shown), main.texts
    # ...and the count's time is the time its command took.
    took = re.search(r"\*✓ bash\*: sleep 1\.5; echo counted \((\d+\.\d)s\)", details.text)
    assert took is not None and 1.5 <= float(took.group(1)) < 2.1, details.text
    await assert_replays(temporal_client, gateway, dev, asked)


LONG = "sleep 4; echo late"


@pytest.mark.parametrize(
    "scenario", [("slack-label-restart", {"turns": [{"tool_calls": [bash(LONG)]}, {"text": ANSWER}]})]
)
async def test_a_tools_entry_keeps_its_label_and_arguments_across_a_gateway_restart(
    slack: ScriptedSlackServer, tmp_path: Path, gateway_env: dict[str, str], temporal_client: Client
) -> None:
    dave = slack.add_user("dave")
    ops = slack.add_channel("ops", members=[dave])
    workdir = tmp_path / "mom"
    async with running_gateway(slack, tmp_path, gateway_env, workdir, []) as first:
        asked = slack.user_says(dave, ops, f"<@{slack.bot_user_id}> run the late job")
        await wait_for(
            lambda: any(f"_→ {LONG}_" in t for m in in_thread(slack, ops, asked) for t in m.texts),
            "the tool's label in the main message",
        )
        first.kill()
        await first.wait()
    async with running_gateway(slack, tmp_path, gateway_env, workdir, []):
        await wait_for(lambda: answered(slack, ops, asked), "the answer after the restart")
    entries = [m.text for m in in_thread(slack, ops, asked) if "bash*" in m.text]
    assert len(entries) == 1 and f"bash*: {LONG}" in entries[0], entries
    assert f"```{LONG}```" in entries[0], entries
    await assert_replays(temporal_client, workdir, ops, asked)
