"""What a `tempi slack` thread shows beyond tool results, as mom does: every tool takes a
`label` the model writes for people, and the thread says when a model call is retried or the
context compacted. A real gateway process, the scripted Slack server and the scripted model."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.slack_server import BotMessage, ScriptedSlackServer
from tests import test_slack_gateway as base
from tests.test_slack_gateway import THINKING, main_messages, running_gateway, wait_for

pytestmark = pytest.mark.slow

slack = base.slack
gateway_env = base.gateway_env

LABEL = "Checking the logs"
ANSWER = "The logs are clean."


@pytest.fixture
async def gateway(
    tmp_path: Path, slack: ScriptedSlackServer, gateway_env: dict[str, str], gateway_args: list[str]
) -> AsyncIterator[Path]:
    # Retries come quickly and only from the session (the SDK's own would hide the failure);
    # compaction keeps little, so one big answer is enough to compact.
    settings = {
        "retry": {"baseDelayMs": 200, "provider": {"maxRetries": 0}},
        "compaction": {"reserveTokens": 1000, "keepRecentTokens": 50},
    }
    (tmp_path / "home" / "settings.json").write_text(json.dumps(settings))
    workdir = tmp_path / "mom"
    async with running_gateway(slack, tmp_path, gateway_env, workdir, gateway_args):
        yield workdir


@pytest.fixture
def gateway_args() -> list[str]:
    return []


def labelled_bash(answer_turn: dict[str, Any]) -> dict[str, Any]:
    return {
        "turns": [
            {"tool_calls": [{"name": "bash", "arguments": {"label": LABEL, "command": "echo all-quiet"}}]},
            {"text": ANSWER, **answer_turn},
        ]
    }


def thread(slack: ScriptedSlackServer, channel: str, asked: str) -> list[BotMessage]:
    [main] = main_messages(slack, channel)
    return [m for m in slack.bot_messages(channel) if m.ts != main.ts and m.thread_ts == asked]


async def ask(slack: ScriptedSlackServer) -> tuple[str, str]:
    alice = slack.add_user("alice")
    general = slack.add_channel("general", members=[alice])
    asked = slack.user_says(alice, general, f"<@{slack.bot_user_id}> are the logs clean?")
    await wait_for(
        lambda: any(m.text == ANSWER for m in main_messages(slack, general)), "the answer in the main message"
    )
    return general, asked


@pytest.mark.parametrize("scenario", [("slack-labels", labelled_bash({}))])
async def test_every_tool_takes_a_label_shown_in_the_main_message_and_the_thread(
    slack: ScriptedSlackServer, gateway: Path, scripted_server: ScriptedLLMServer
) -> None:
    general, asked = await ask(slack)
    [main] = main_messages(slack, general)
    assert main.texts[0] == THINKING
    assert any(f"_→ {LABEL}_" in text for text in main.texts[1:-1]), main.texts
    details = [m.text for m in thread(slack, general, asked)]
    [bash] = [d for d in details if d.startswith("*✓ bash*")]
    assert re.match(rf"\*✓ bash\*: {LABEL} \(\d+\.\ds\)\n```echo all-quiet```", bash), bash
    assert "*Result:*\n```all-quiet" in bash  # the label did not stop the command

    # The model was told, in every request, that each of its tools needs a label.
    requests = scripted_server.requests_for("slack-labels")
    assert len(requests) == 2
    for request in requests:
        tools = {t["function"]["name"]: t["function"]["parameters"] for t in request.body["tools"]}
        assert {"read", "bash", "edit", "write", "attach"} <= set(tools)
        for name, schema in tools.items():
            assert "label" in schema["required"], (name, schema)
            assert schema["properties"]["label"]["type"] == "string"


@pytest.mark.parametrize(
    "scenario",
    [("slack-notices", labelled_bash({"fail_times": 1, "fail_status": 503, "usage": {"input": 127_500}}))],
)
async def test_the_thread_says_when_a_model_call_is_retried_and_the_context_compacted(
    slack: ScriptedSlackServer, gateway: Path, scripted_server: ScriptedLLMServer
) -> None:
    general, asked = await ask(slack)
    await wait_for(
        lambda: any("*Usage Summary*" in m.text for m in thread(slack, general, asked)),
        "the usage summary",
    )
    [details] = [m.text for m in thread(slack, general, asked) if m.texts[0] != THINKING]
    # One details message, in the order it happened: the tool, the failed call asked again,
    # the compaction the big answer set off, and last the usage summary (the answer itself
    # is the main message's, not copied).
    marks = ["*✓ bash*", "_Retrying (1/3)..._", "_Compacting context..._", "*Usage Summary*"]
    assert [details.index(mark) for mark in marks] == sorted(details.index(mark) for mark in marks), details
    assert ANSWER not in details
    kinds = [(r.kind, r.status) for r in scripted_server.requests_for("slack-notices")]
    assert kinds == [("turn", 200), ("turn", 503), ("turn", 200), ("summary", 200)], kinds
    [main] = main_messages(slack, general)
    assert main.text == ANSWER
