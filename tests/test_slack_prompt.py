# ruff: noqa: F811  (the gateway fixtures are imported by name, and tests take them as arguments)
"""What mom tells the model and how her answers land in Slack: the system prompt rebuilt
from memory and skills on every run, `[SILENT]`, long answers split, the usage summary
and thinking copies in the thread. A real `tempi slack` process against the scripted
Slack server, the scripted model and the dev server."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.slack_server import ScriptedSlackServer
from tests.test_slack_gateway import (  # noqa: F401  (fixtures are found by name)
    THINKING,
    assert_replays,
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
