"""read, write, edit and ls run as local activities on the session's worker (one server round
trip per turn fewer, issue 13); grep and bash start as local activities too, but through
`run_tool_briefly` (tests/test_tool_handoff.py); what the user sees is the same."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.history_payloads import local_activity_tools
from tests.session_harness import (
    assert_single_chain,
    running_worker,
    scripted_model,
    start_session,
    unique_queue,
)


async def test_file_tools_grep_and_bash_run_in_the_workflow_task(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "local-tools",
        [
            {"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "one\n"}}]},
            {
                "tool_calls": [
                    {"name": "edit", "arguments": {"path": "a.txt", "oldText": "one", "newText": "two"}}
                ]
            },
            {
                "tool_calls": [
                    {"name": "read", "arguments": {"path": "a.txt"}},
                    {"name": "ls", "arguments": {}},
                    {"name": "grep", "arguments": {"pattern": "two"}},
                ]
            },
            {"tool_calls": [{"name": "bash", "arguments": {"command": "cat a.txt >> log.txt"}}]},
            {"text": "a.txt says two."},
        ],
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "local-tools"),
            task_queue=queue,
            tools=["read", "bash", "edit", "write", "ls", "grep"],
        )
        await s.prompt("Change a.txt.")
        events = await s.run_to_idle()
        history = await s.handle.fetch_history()

    work = Path(s.config.cwd)
    assert (work / "a.txt").read_text() == "two\n"
    assert (work / "log.txt").read_text() == "two\n"  # bash ran once
    results = {
        e["message"]["toolName"]: e["message"]["content"][0]["text"]
        for e in events
        if e["type"] == "message_end" and e["message"]["role"] == "toolResult"
    }
    assert results["read"] == "two\n"
    assert "a.txt" in results["ls"]
    assert "a.txt:1: two" in results["grep"]
    assert not any(e["message"].get("isError") for e in events if e["type"] == "message_end")
    final = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == "a.txt says two."

    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert "run_tool" not in scheduled
    assert sorted(local_activity_tools(history.events)) == ["bash", "edit", "grep", "ls", "read", "write"]

    entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()]
    assert_single_chain(entries)
    tool_results = [e for e in entries if e.get("message", {}).get("role") == "toolResult"]
    assert [r["message"]["toolName"] for r in tool_results] == ["write", "edit", "read", "ls", "grep", "bash"]
