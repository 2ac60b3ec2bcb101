"""Issue 37, items 2-4: `tempi slack` as a team uses it. Messages that wait behind a run
do not fill the channel with busy notices; a thread's first run sees what the channel said
before it; a thread under one of the bot's own messages continues that conversation.
A real `tempi slack` process, the scripted Slack server and the scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.slack_server import BotMessage, ScriptedSlackServer
from tests import test_slack_gateway as base
from tests.test_slack_events import write_event
from tests.test_slack_gateway import THINKING, assert_replays, wait_for

# The gateway tests' fixtures: a scripted Slack server and a real `tempi slack` process.
slack = base.slack
gateway_env = base.gateway_env
gateway_args = base.gateway_args
gateway = base.gateway

FIRST, SECOND = "First answer.", "Second answer."
BUSY = "_Already working. Say `@mom stop` to cancel._"


def answers(*texts: str, slow_first_ms: int = 0) -> dict[str, Any]:
    """Text turns served in order, the first after `slow_first_ms` (a run that takes a while)."""
    turns: list[dict[str, Any]] = [{"text": t} for t in texts]
    if slow_first_ms:
        turns[0]["first_chunk_delay_ms"] = slow_first_ms
    return {"select": "sequential", "turns": turns}


def posted(slack: ScriptedSlackServer, channel: str, text: str) -> list[BotMessage]:
    return [m for m in slack.bot_messages(channel) if m.text == text]


def answered(slack: ScriptedSlackServer, channel: str, text: str) -> list[BotMessage]:
    """Runs' main messages that ended with `text` (not its copy among the tool details)."""
    return [
        m
        for m in posted(slack, channel, text)
        if m.texts[0] == THINKING or m.texts[0].startswith("_Starting event:")
    ]


def sent_to_model(server: ScriptedLLMServer, scenario: str, index: int) -> str:
    """What the model was sent on its `index`-th call, as one string to look in."""
    return json.dumps(server.requests_for(scenario)[index].body["messages"], ensure_ascii=False)


# --- item 2: waiting quietly ------------------------------------------------------------------


@pytest.mark.parametrize("scenario", [("slack-quiet-events", answers(FIRST, SECOND, slow_first_ms=4000))])
async def test_events_that_wait_behind_a_run_post_no_busy_notice(
    slack: ScriptedSlackServer, gateway: Path, temporal_client: Client
) -> None:
    alice = slack.add_user("alice")
    general = slack.add_channel("general", members=[alice])
    write_event(gateway, "burst-0.json", {"type": "immediate", "channelId": general, "text": "check 0"})
    await wait_for(
        lambda: (
            bool(slack.bot_messages(general))
            and slack.bot_messages(general)[0].texts[0].startswith("_Starting event: burst-0.json_")
        ),
        "the first event's run",
    )
    for i in range(1, 6):
        write_event(
            gateway, f"burst-{i}.json", {"type": "immediate", "channelId": general, "text": f"check {i}"}
        )
    await wait_for(lambda: bool(answered(slack, general, SECOND)), "the run of the events that waited")

    assert not [m for m in slack.bot_messages(general) if m.text.startswith("_Already working")]
    assert len(answered(slack, general, FIRST)) == 1
    await assert_replays(temporal_client, gateway, general, None)


@pytest.mark.parametrize("scenario", [("slack-quiet-people", answers(FIRST, SECOND, slow_first_ms=4000))])
async def test_a_person_is_told_once_per_run_that_the_bot_is_busy_in_their_thread(
    slack: ScriptedSlackServer, gateway: Path, temporal_client: Client
) -> None:
    alice, bob = slack.add_user("alice"), slack.add_user("bob")
    ops = slack.add_channel("ops", members=[alice, bob])
    bot = f"<@{slack.bot_user_id}>"
    asked = slack.user_says(alice, ops, f"{bot} deploy please")
    await wait_for(lambda: any(m.texts[0] == THINKING for m in slack.bot_messages(ops)), "the first run")
    for who, text in ((alice, "and the docs"), (bob, "also the api"), (alice, "and tests"), (bob, "and ci")):
        slack.user_says(who, ops, f"{bot} {text}", thread_ts=asked)
    await wait_for(lambda: bool(answered(slack, ops, SECOND)), "the run of the messages that waited")

    busy = posted(slack, ops, BUSY)
    assert len(busy) == 2, [m.text for m in slack.bot_messages(ops)]  # one for alice, one for bob
    assert {m.thread_ts for m in busy} == {asked}
    await assert_replays(temporal_client, gateway, ops, asked)


# --- item 3: the conversation before the mention ----------------------------------------------


@pytest.mark.parametrize("scenario", [("slack-before-mention", answers(FIRST, SECOND))])
async def test_a_threads_first_run_sees_what_the_channel_said_since_the_bot_last_spoke(
    slack: ScriptedSlackServer, gateway: Path, scripted_server: ScriptedLLMServer
) -> None:
    alice, bob, carol = slack.add_user("alice"), slack.add_user("bob"), slack.add_user("carol")
    dev = slack.add_channel("dev", members=[alice, bob, carol])
    bot = f"<@{slack.bot_user_id}>"
    slack.user_says(carol, dev, "lunch at noon anyone?")
    slack.user_says(carol, dev, f"{bot} what time is it in Tokyo?")
    await wait_for(lambda: bool(answered(slack, dev, FIRST)), "the answer to carol")

    slack.user_says(alice, dev, "we should ship the release on Friday")
    slack.user_says(bob, dev, "Monday is safer, the freeze ends on Sunday")
    asked = slack.user_says(alice, dev, f"{bot} summarize the discussion above")
    await wait_for(lambda: bool(answered(slack, dev, SECOND)), "the summary")

    sent = sent_to_model(scripted_server, "slack-before-mention", 1)
    assert "[alice]: we should ship the release on Friday" in sent
    assert "[bob]: Monday is safer, the freeze ends on Sunday" in sent
    assert "summarize the discussion above" in sent
    # Only what came after the bot last spoke: the earlier chat was its first thread's business.
    assert "lunch at noon" not in sent
    [summary] = answered(slack, dev, SECOND)
    assert summary.thread_ts == asked


@pytest.mark.parametrize("scenario", [("slack-in-their-thread", answers(FIRST, SECOND))])
async def test_a_mention_inside_peoples_thread_sees_the_thread_and_what_came_before_it(
    slack: ScriptedSlackServer, gateway: Path, scripted_server: ScriptedLLMServer
) -> None:
    dave, erin = slack.add_user("dave"), slack.add_user("erin")
    qa = slack.add_channel("qa", members=[dave, erin])
    slack.user_says(erin, qa, "nightly run took 3 hours again")
    red = slack.user_says(dave, qa, "the build is red")
    slack.user_says(erin, qa, "since the merge of #42", thread_ts=red)
    slack.user_says(dave, qa, f"<@{slack.bot_user_id}> why is that?", thread_ts=red)
    await wait_for(lambda: bool(answered(slack, qa, FIRST)), "the answer in the thread")

    sent = sent_to_model(scripted_server, "slack-in-their-thread", 0)
    for line in (
        "[erin]: nightly run took 3 hours again",
        "[dave]: the build is red",
        "[erin]: since the merge",
    ):
        assert line in sent, sent
    # The channel's lines come first, then the thread's.
    assert sent.index("nightly run") < sent.index("the build is red") < sent.index("since the merge")
    [answer] = answered(slack, qa, FIRST)
    assert answer.thread_ts == red


# --- item 4: a thread under the bot's own message -------------------------------------------------


@pytest.mark.parametrize("scenario", [("slack-dm-thread", answers(FIRST, SECOND))])
async def test_a_thread_under_the_bots_dm_answer_continues_the_dm(
    slack: ScriptedSlackServer, gateway: Path, scripted_server: ScriptedLLMServer, temporal_client: Client
) -> None:
    bob = slack.add_user("bob")
    dm = slack.open_dm(bob)
    slack.user_says(bob, dm, "remember the code word: pelican")
    await wait_for(lambda: bool(answered(slack, dm, FIRST)), "the DM answer")
    [answer] = answered(slack, dm, FIRST)
    assert answer.thread_ts is None

    slack.user_says(bob, dm, "what was the code word?", thread_ts=answer.ts)
    await wait_for(lambda: bool(answered(slack, dm, SECOND)), "the answer in the thread")

    sent = sent_to_model(scripted_server, "slack-dm-thread", 1)
    assert "remember the code word: pelican" in sent and FIRST in sent
    assert "what was the code word?" in sent
    [second] = answered(slack, dm, SECOND)
    assert second.thread_ts == answer.ts
    # The thread has a session of its own, forked from the DM's: the DM's file is unchanged.
    thread_file = gateway / dm / "threads" / answer.ts / "context.jsonl"
    header = json.loads(thread_file.read_text().splitlines()[0])
    assert header["parentSession"] == str((gateway / dm / "context.jsonl").resolve())
    assert "what was the code word" not in (gateway / dm / "context.jsonl").read_text()
    await assert_replays(temporal_client, gateway, dm, answer.ts)


@pytest.mark.parametrize("scenario", [("slack-report-thread", answers(FIRST, SECOND))])
async def test_a_reply_under_an_events_report_continues_the_events_conversation(
    slack: ScriptedSlackServer, gateway: Path, scripted_server: ScriptedLLMServer
) -> None:
    alice = slack.add_user("alice")
    general = slack.add_channel("general", members=[alice])
    write_event(
        gateway, "daily.json", {"type": "immediate", "channelId": general, "text": "report CI status"}
    )
    await wait_for(lambda: bool(answered(slack, general, FIRST)), "the event's report")
    [report] = answered(slack, general, FIRST)
    assert report.thread_ts is None

    # A plain reply, no mention: the bot's thread, so it starts a run there.
    slack.user_says(alice, general, "why did it fail?", thread_ts=report.ts)
    await wait_for(lambda: bool(answered(slack, general, SECOND)), "the answer under the report")

    sent = sent_to_model(scripted_server, "slack-report-thread", 1)
    assert "[EVENT:daily.json:immediate:immediate] report CI status" in sent and FIRST in sent
    assert "why did it fail?" in sent
    [second] = answered(slack, general, SECOND)
    assert second.thread_ts == report.ts


# --- item 7: `stop` at a channel's top level ---------------------------------------------------


@pytest.mark.parametrize(
    "scenario", [("slack-top-stop", base.bash_then_answer("sleep 20; echo late", SECOND))]
)
async def test_stop_at_the_top_level_stops_the_senders_thread_or_says_which_thread_runs(
    slack: ScriptedSlackServer, gateway: Path, temporal_client: Client
) -> None:
    alice, bob = slack.add_user("alice"), slack.add_user("bob")
    ops = slack.add_channel("ops", members=[alice, bob])
    bot = f"<@{slack.bot_user_id}>"
    asked = slack.user_says(alice, ops, f"{bot} start the long job")
    await wait_for(
        lambda: any(any("_→ sleep 20" in t for t in m.texts) for m in slack.bot_messages(ops)), "the run"
    )

    # bob has nothing running: he is told which thread runs, and alice's run goes on.
    bobs = slack.user_says(bob, ops, f"{bot} stop")
    await wait_for(lambda: any(m.thread_ts == bobs for m in slack.bot_messages(ops)), "the answer to bob")
    [told] = [m for m in slack.bot_messages(ops) if m.thread_ts == bobs]
    link = f"<https://tempi-test.slack.com/archives/{ops}/p{asked.replace('.', '')}|this thread>"
    assert told.text == (
        f"_Nothing of yours is running. Running here: {link} (for <@{alice}>). "
        "Say `@mom stop` in a thread to stop its run._"
    )
    assert not [m for m in slack.bot_messages(ops) if m.text == "_Stopping..._"]

    # alice's own `stop` at the top level stops her run, in its thread.
    slack.user_says(alice, ops, f"{bot} stop")
    await wait_for(
        lambda: any(m.texts[0] == "_Stopping..._" and m.text == "_Stopped_" for m in slack.bot_messages(ops)),
        "_Stopping..._ edited to _Stopped_ in alice's thread",
    )
    [stopped] = [m for m in slack.bot_messages(ops) if m.texts[0] == "_Stopping..._"]
    assert stopped.thread_ts == asked
    assert not posted(slack, ops, "_Nothing running_")

    # With nothing running at all, mom's answer.
    again = slack.user_says(bob, ops, f"{bot} stop")
    await wait_for(lambda: any(m.thread_ts == again for m in slack.bot_messages(ops)), "the second answer")
    assert [m.text for m in slack.bot_messages(ops) if m.thread_ts == again] == ["_Nothing running_"]
    await assert_replays(temporal_client, gateway, ops, asked)
