"""`tempi web`'s overview lists `tempi slack`'s conversations: a real gateway against the
scripted Slack server answers a mention, and the console shows its conversation with its
channel, thread, state and session, whose view opens from the link."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp

from tempi.testing.slack_server import ScriptedSlackServer
from tests.processes import stop_process
from tests.test_slack_gateway import (  # noqa: F401 (fixtures)
    finished,
    gateway,
    gateway_args,
    gateway_env,
    scenario,
    slack,
    wait_for,
)
from tests.web_rig import Console, console_url


async def test_the_overview_lists_slack_conversations_with_their_session(
    slack: ScriptedSlackServer,  # noqa: F811
    gateway: Path,  # noqa: F811
    gateway_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    alice = slack.add_user("alice")
    general = slack.add_channel("general", members=[alice])
    asked = slack.user_says(alice, general, f"<@{slack.bot_user_id}> run the command please")
    await wait_for(lambda: finished(slack, general), "the answer in Slack")
    context = gateway / general / "threads" / asked / "context.jsonl"
    session_id = json.loads(context.read_text().splitlines()[0])["id"]

    proc = subprocess.Popen(
        [sys.executable, "-m", "tempi", "web", "--port", "0"],
        cwd=tmp_path,
        env=gateway_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        console = Console(proc, *console_url(proc))
        headers = {"X-Tempi-Token": console.token}
        async with aiohttp.ClientSession() as http:

            async def listed_row() -> tuple[str, dict[str, Any]]:
                async with http.get(f"{console.base}/api/slack", headers=headers) as listed:
                    body = await listed.text()
                # The server is shared with other tests' gateways: this conversation is the
                # one whose session the gateway's thread context names.
                rows = json.loads(body)["conversations"]
                [row] = [r for r in rows if r["session"] == session_id]
                return body, row

            # The answer shows in Slack before the run's last steps (its details message,
            # the run's end) are done: the row turns idle then.
            body, row = await listed_row()
            deadline = time.monotonic() + 30
            while row["state"] != "idle" and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                body, row = await listed_row()
            assert row["channel"] == general and row["thread"] == asked and row["mode"] == "thread"
            assert row["state"] == "idle"  # open, no run going
            assert row["session"] == session_id
            active = datetime.fromisoformat(row["lastActivity"])
            assert timedelta(0) <= datetime.now(UTC) - active < timedelta(minutes=5)
            assert slack.bot_token not in body and slack.app_token not in body

            # The link opens the conversation's session: its transcript from mom's file.
            async with http.get(f"{console.base}/api/sessions/{session_id}", headers=headers) as info:
                assert info.status == 200
            async with http.get(f"{console.base}/api/sessions/{session_id}/tree", headers=headers) as tree:
                assert "run the command please" in (await tree.json())["html"]
    finally:
        stop_process(proc)
