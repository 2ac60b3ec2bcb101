# ruff: noqa: F811  (the gateway fixtures are imported by name, and tests take them as arguments)
"""What mom tells the model and how her answers land in Slack: the system prompt rebuilt
from memory and skills on every run, `[SILENT]`, long answers split, the usage summary
and thinking copies in the thread. A real `tempi slack` process against the scripted
Slack server, the scripted model and the dev server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.slack_server import BotMessage, ScriptedSlackServer
from tests.test_slack_gateway import (  # noqa: F401  (fixtures are found by name)
    THINKING,
    assert_replays,
    bash_then_answer,
    gateway,
    gateway_args,
    gateway_env,
    slack,
    wait_for,
)

pytestmark = pytest.mark.slow


def system_prompts(server: ScriptedLLMServer, scenario: str) -> list[str]:
    prompts = []
    for request in server.requests_for(scenario):
        first = (request.body.get("messages") or [{}])[0]
        if first.get("role") in ("system", "developer"):
            prompts.append(str(first.get("content")))
    return prompts


def answered(slack: ScriptedSlackServer, channel: str, text: str) -> bool:
    return any(m.texts[0] == THINKING and m.text == text for m in slack.bot_messages(channel))


MEMORY = "slack-memory"


@pytest.mark.parametrize("scenario", [(MEMORY, {"turns": [{"text": "First."}, {"text": "Second."}]})])
async def test_memory_and_skills_are_read_into_the_prompt_on_every_run(
    slack: ScriptedSlackServer, gateway: Path, scripted_server: ScriptedLLMServer, temporal_client: Client
) -> None:
    (gateway / "MEMORY.md").write_text("The team deploys on Fridays.\n")
    alice = slack.add_user("alice")
    general = slack.add_channel("general", members=[alice])
    (gateway / general).mkdir(parents=True, exist_ok=True)
    (gateway / general / "MEMORY.md").write_text("This channel builds project falcon.\n")
    skill = gateway / "skills" / "weather"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: weather\ndescription: Look up the forecast\n---\nRun it.\n")
    bot = f"<@{slack.bot_user_id}>"

    asked = slack.user_says(alice, general, f"{bot} what do you know?")
    await wait_for(lambda: answered(slack, general, "First."), "the first answer")
    [first] = system_prompts(scripted_server, MEMORY)
    assert first.startswith("You are mom")
    assert "### Global Workspace Memory\nThe team deploys on Fridays." in first
    assert "### Channel-Specific Memory\nThis channel builds project falcon." in first
    assert "<name>weather</name>" in first and "Look up the forecast" in first
    assert f"{alice}\t@alice" in first and f"{general}\t#general" in first
    assert f"{gateway.resolve()}/{general}/" in first

    # What the agent (or a person) writes to memory between runs is in the next run's prompt.
    (gateway / general / "MEMORY.md").write_text("Project falcon ships on Monday.\n")
    slack.user_says(alice, general, f"{bot} and now?", thread_ts=asked)
    await wait_for(lambda: answered(slack, general, "Second."), "the second answer")
    second = system_prompts(scripted_server, MEMORY)[-1]
    assert "Project falcon ships on Monday." in second
    assert "This channel builds project falcon." not in second
    # Nothing dumps the prompt to disk, as mom's last_prompt.jsonl did.
    assert not [p for p in gateway.rglob("*") if "Fridays" in _text(p)]
    await assert_replays(temporal_client, gateway, general, asked)


def _text(path: Path) -> str:
    if not path.is_file() or path.name == "MEMORY.md":
        return ""
    return path.read_text(errors="replace")


SILENT = "slack-silent"


@pytest.mark.parametrize(
    "scenario", [(SILENT, bash_then_answer("echo nothing new", "[SILENT] nothing to report"))]
)
async def test_a_silent_answer_deletes_the_main_message_and_its_thread_posts(
    slack: ScriptedSlackServer, gateway: Path, temporal_client: Client
) -> None:
    bob = slack.add_user("bob")
    ops = slack.add_channel("ops", members=[bob])
    asked = slack.user_says(bob, ops, f"<@{slack.bot_user_id}> anything new?")

    def main() -> list[BotMessage]:
        return [m for m in slack.bot_messages(ops) if m.texts[0] == THINKING]

    await wait_for(lambda: any(m.deleted for m in main()), "the main message deleted")
    await slack.idle()
    posted = slack.bot_messages(ops)
    assert any(m.text.startswith("*✓ bash*") for m in posted)  # there were details to take back
    assert all(m.deleted for m in posted), [(m.text, m.deleted) for m in posted]
    deletes = slack.calls("chat.delete")
    assert deletes[-1].args["ts"] == main()[0].ts  # the main message last, after its thread
    await assert_replays(temporal_client, gateway, ops, asked)


LONG = "slack-long-answer"
BIG = "".join(f"line {i:05d}\n" for i in range(10_000))[:100_000]
THOUGHT = "Counting the lines first."


@pytest.mark.parametrize(
    "scenario",
    [
        (
            LONG,
            {
                "turns": [
                    {
                        "thinking": THOUGHT,
                        "text": BIG,
                        "chunk_size": 5_000,
                        "usage": {"input": 1_200, "output": 29_000},
                    }
                ]
            },
        )
    ],
)
async def test_a_long_answer_arrives_whole_with_thinking_and_usage_in_the_thread(
    slack: ScriptedSlackServer, gateway: Path, temporal_client: Client
) -> None:
    carol = slack.add_user("carol")
    dev = slack.add_channel("dev", members=[carol])
    asked = slack.user_says(carol, dev, f"<@{slack.bot_user_id}> print ten thousand lines")

    def summary() -> list[BotMessage]:
        return [m for m in slack.bot_messages(dev) if "*Usage Summary*" in m.text]

    await wait_for(lambda: bool(summary()), "the usage summary")
    [main] = [m for m in slack.bot_messages(dev) if m.texts[0] == THINKING]
    assert main.text == BIG[:39_950] + "\n\n_(see thread for full response)_"

    thread = [m.text for m in slack.bot_messages(dev) if m.thread_ts == asked and m.ts != main.ts]
    # The run's details (its thinking, then its usage) are one message, before the answer's parts.
    details = thread[0]
    assert details.startswith(f"_{THOUGHT}_")
    parts = thread[1:]
    assert len(parts) == 3
    assert parts[0].endswith("\n_(continued 1...)_") and parts[1].endswith("\n_(continued 2...)_")
    whole = "".join(re.sub(r"\n_\(continued \d+\.\.\.\)_$", "", p) for p in parts)
    assert whole == BIG  # every character, in order

    [usage] = summary()
    assert usage.thread_ts == asked and usage.text.startswith(f"_{THOUGHT}_\n\n*Usage Summary*")
    usage_text = usage.text.split("\n\n", 1)[1]
    assert usage_text.splitlines() == [
        "*Usage Summary*",
        "Tokens: 1,200 in, 29,000 out",
        "Context: 30k / 128k (23.6%)",
        "Cost: $0.0036 in, $0.4350 out",
        "*Total: $0.4386*",
    ]
    await assert_replays(temporal_client, gateway, dev, asked)


ATTACH = "slack-attach"


@pytest.mark.parametrize(
    "scenario",
    [
        (
            ATTACH,
            {
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "bash", "arguments": {"command": "printf 'weekly numbers' > report.txt"}}
                        ]
                    },
                    {
                        "tool_calls": [
                            {
                                "name": "attach",
                                "arguments": {
                                    "label": "the report",
                                    "path": "report.txt",
                                    "title": "Weekly report",
                                },
                            }
                        ]
                    },
                    {"text": "Shared the report."},
                ]
            },
        )
    ],
)
async def test_attach_uploads_the_named_file_into_the_conversation(
    slack: ScriptedSlackServer, gateway: Path, temporal_client: Client
) -> None:
    erin = slack.add_user("erin")
    reports = slack.add_channel("reports", members=[erin])
    asked = slack.user_says(erin, reports, f"<@{slack.bot_user_id}> send me the report as a file")

    await wait_for(lambda: answered(slack, reports, "Shared the report."), "the answer")
    [shared] = [m for m in slack.bot_messages(reports) if m.file_ids]
    assert shared.thread_ts == asked
    [file_id] = shared.file_ids
    assert slack.file_content(file_id) == b"weekly numbers"
    assert slack.workspace.files[file_id].title == "Weekly report"
    assert [c.method for c in slack.calls() if c.method.startswith("files.")] == [
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    ]
    assert any("*✓ attach*: the report" in m.text for m in slack.bot_messages(reports))
    await assert_replays(temporal_client, gateway, reports, asked)
