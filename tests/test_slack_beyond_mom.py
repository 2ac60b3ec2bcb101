"""Beyond mom in `tempi slack`: a reply in a bot's thread steers the run (its images too) or follows up, allow-lists say
who may use the bot and where, only a run's owner or an admin may stop it, and a channel's
settings.json picks its model and thinking level."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.slack_server import Attachment, BotMessage, ScriptedSlackServer
from tests import test_slack_gateway as base
from tests.test_slack_gateway import bash_then_answer, main_messages, running_gateway, wait_for
from tests.test_slack_log import PNG, see_images

pytestmark = pytest.mark.slow

# The gateway tests' fixtures: a scripted Slack server and a real `tempi slack` process.
slack = base.slack
gateway_env = base.gateway_env


@pytest.fixture
async def gateway(
    tmp_path: Path, slack: ScriptedSlackServer, gateway_env: dict[str, str], gateway_args: list[str]
) -> AsyncIterator[Path]:
    """The gateway tests' `tempi slack`, with a model that takes images."""
    see_images(Path(gateway_env["TEMPI_HOME"]) / "models.json")
    workdir = tmp_path / "mom"
    async with running_gateway(slack, tmp_path, gateway_env, workdir, gateway_args):
        yield workdir


ANSWER = "Done, and I used staging too."
FOLLOW_UP_ANSWER = "Staging is at version 2."


@pytest.fixture
def scenario() -> tuple[str, dict[str, Any]]:
    turns = bash_then_answer("sleep 6; echo deployed", ANSWER)
    turns["turns"].append({"text": FOLLOW_UP_ANSWER})
    return "slack-steer", turns


@pytest.fixture
def gateway_args() -> list[str]:
    return ["--allow-users", "alice,bob", "--allow-channels", "#general", "--admins", "carol"]


def working(slack: ScriptedSlackServer, channel: str) -> bool:
    return any(any("_→ sleep 6; echo deployed_" in t for t in m.texts) for m in main_messages(slack, channel))


def replies(slack: ScriptedSlackServer, channel: str, prefix: str) -> list[BotMessage]:
    return [m for m in slack.bot_messages(channel) if m.text.startswith(prefix)]


@pytest.mark.parametrize("gateway_args", [[]])
async def test_a_reply_in_the_thread_steers_the_run_or_follows_up(
    slack: ScriptedSlackServer, gateway: Path, scripted_server: ScriptedLLMServer
) -> None:
    alice = slack.add_user("alice")
    bob = slack.add_user("bob")
    general = slack.add_channel("general", members=[alice, bob])
    asked = slack.user_says(alice, general, f"<@{slack.bot_user_id}> deploy please")
    await wait_for(lambda: working(slack, general), "the tool label")

    picture = Attachment("staging.png", PNG, "image/png")
    slack.user_says(bob, general, "use the staging server too", thread_ts=asked, files=[picture])
    await wait_for(
        lambda: any(m.text == ANSWER for m in main_messages(slack, general)), "the answer of the steered run"
    )

    # The reply reached the running session before its next model call: no busy reply, no second run.
    assert replies(slack, general, "_Already working") == []
    assert len(main_messages(slack, general)) == 1
    last_request = scripted_server.requests_for("slack-steer")[-1].body
    [steering] = [m for m in last_request["messages"] if "[bob]: use the staging server too" in str(m)]
    # The reply's picture reached the model with it, as an image block.
    assert [p["image_url"]["url"] for p in steering["content"] if p.get("type") == "image_url"] == [
        "data:image/png;base64," + base64.b64encode(PNG).decode()
    ]
    context = (gateway / general / "threads" / asked / "context.jsonl").read_text()
    assert "[bob]: use the staging server too" in context

    # With the run over, a plain reply in the thread follows up with a run of its own.
    slack.user_says(bob, general, "which version is on staging?", thread_ts=asked)
    await wait_for(
        lambda: any(m.text == FOLLOW_UP_ANSWER for m in main_messages(slack, general)),
        "the follow-up's answer",
    )
    assert len(main_messages(slack, general)) == 2
    assert "[bob]: which version is on staging?" in str(scripted_server.requests_for("slack-steer")[-1].body)

    # A plain channel message outside any bot thread starts nothing.
    slack.user_says(bob, general, "unrelated chatter")
    await slack.idle()
    assert len(main_messages(slack, general)) == 2


async def test_allow_lists_keep_others_out_and_only_the_owner_or_an_admin_may_stop(
    slack: ScriptedSlackServer, gateway: Path
) -> None:
    alice, bob, carol, mallory = (slack.add_user(n) for n in ("alice", "bob", "carol", "mallory"))
    general = slack.add_channel("general", members=[alice, bob, carol, mallory])
    random = slack.add_channel("random", members=[alice])
    bot = f"<@{slack.bot_user_id}>"

    slack.user_says(mallory, general, f"{bot} run rm -rf / please")
    slack.user_says(alice, random, f"{bot} deploy from here")
    asked = slack.user_says(alice, general, f"{bot} deploy please")
    await wait_for(lambda: working(slack, general), "the tool label")

    slack.user_says(bob, general, f"{bot} stop", thread_ts=asked)
    await wait_for(
        lambda: bool(replies(slack, general, f"_Only <@{alice}> or an admin can stop this run._")),
        "the refusal of bob's stop",
    )
    assert replies(slack, general, "_Stopping") == []

    slack.user_says(carol, general, f"{bot} stop", thread_ts=asked)
    await wait_for(
        lambda: any(
            m.texts[0] == "_Stopping..._" and m.text == "_Stopped_" for m in slack.bot_messages(general)
        ),
        "the admin's stop",
    )
    # Only alice's mention in #general ran.
    assert len(main_messages(slack, general)) == 1
    assert slack.bot_messages(random) == []
    assert not (gateway / random).exists()


@pytest.mark.parametrize(
    "scenario", [("slack-settings", {"select": "sequential", "turns": [{"text": "one"}, {"text": "two"}]})]
)
async def test_a_channels_settings_json_picks_its_model_and_thinking_level(
    slack: ScriptedSlackServer,
    tmp_path: Path,
    gateway_env: dict[str, str],
    scripted_server: ScriptedLLMServer,
) -> None:
    models_json = tmp_path / "home" / "models.json"
    models = json.loads(models_json.read_text())
    [default] = models["providers"]["mock"]["models"]
    models["providers"]["mock"]["models"].append(
        {**default, "id": "deep-model", "name": "deep-model", "reasoning": True}
    )
    models_json.write_text(json.dumps(models))
    alice = slack.add_user("alice")
    research = slack.add_channel("research", members=[alice])
    chat = slack.add_channel("chat", members=[alice])
    workdir = tmp_path / "mom"
    (workdir / research).mkdir(parents=True)
    (workdir / research / "settings.json").write_text(
        json.dumps({"defaultModel": "mock/deep-model", "defaultThinkingLevel": "high"})
    )
    bot = f"<@{slack.bot_user_id}>"
    async with running_gateway(slack, tmp_path, gateway_env, workdir, ["--allow-users", "alice"]):
        slack.user_says(alice, research, f"{bot} think hard")
        await wait_for(
            lambda: any(m.text == "one" for m in main_messages(slack, research)), "research's answer"
        )
        slack.user_says(alice, chat, f"{bot} quick one")
        await wait_for(lambda: any(m.text == "two" for m in main_messages(slack, chat)), "chat's answer")
    deep, plain = (r.body for r in scripted_server.requests_for("slack-settings"))
    assert (deep["model"], deep.get("reasoning_effort")) == ("deep-model", "high")
    assert plain["model"] == "mock-model" and "reasoning_effort" not in plain
