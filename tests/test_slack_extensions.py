"""Extensions in the Slack front end: `tempi slack --extension PATH` gives every
conversation's session the extension, so its guard holds for a team as for one user."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.slack_server import ScriptedSlackServer
from tests.test_slack_gateway import (  # noqa: F401 (fixtures)
    bash_then_answer,
    gateway,
    gateway_env,
    main_messages,
    slack,
    wait_for,
)

pytestmark = pytest.mark.slow

GUARD = Path(__file__).parent / "extensions" / "guard.py"
SCENARIO = "slack-guarded"


@pytest.fixture
def scenario() -> tuple[str, dict[str, Any]]:
    return SCENARIO, bash_then_answer("rm -rf keep", "The guard said no.")


@pytest.fixture
def gateway_args() -> list[str]:
    return ["--sandbox", "host", "--extension", str(GUARD)]


async def test_a_slack_conversation_runs_the_gateways_extension(
    slack: ScriptedSlackServer,  # noqa: F811
    gateway: Path,  # noqa: F811
    scripted_server: ScriptedLLMServer,
) -> None:
    keep = gateway / "keep"
    keep.mkdir(parents=True, exist_ok=True)
    (keep / "notes.txt").write_text("important\n")
    alice = slack.add_user("alice")
    general = slack.add_channel("general", members=[alice])
    slack.user_says(alice, general, f"<@{slack.bot_user_id}> clean up please")

    await wait_for(
        lambda: any(m.text == "The guard said no." for m in main_messages(slack, general)), "the final answer"
    )
    requests = scripted_server.requests_for(SCENARIO)
    assert "Guard rule: never delete files" in json.dumps(requests[0].body)
    assert "rm -rf is not allowed here (guard extension)" in json.dumps(requests[1].body["messages"][-1])
    assert (keep / "notes.txt").read_text() == "important\n"
