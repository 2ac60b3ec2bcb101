"""The `task` tool: subagents as child workflows with their own session files."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import Client

from tempi.agent.subagents import AgentDefinition
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue


def _header(path: str) -> dict:
    return json.loads(Path(path).read_text().splitlines()[0])


async def test_parallel_and_chain_subagents_answer_through_their_own_sessions(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "parent-tasks",
        [
            {
                "tool_calls": [
                    {
                        "name": "task",
                        "arguments": {
                            "tasks": [
                                {"agent": "helper", "task": "say alpha"},
                                {"agent": "helper", "task": "say beta"},
                            ]
                        },
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "task",
                        "arguments": {
                            "chain": [
                                {"agent": "helper", "task": "first step"},
                                {"agent": "helper", "task": "improve: {previous}"},
                            ]
                        },
                    }
                ]
            },
            {"text": "All delegated."},
        ],
    )
    scripted_server.add_scenario(
        "child-answers", [{"text": "child answer", "usage": {"input": 10, "output": 5}}]
    )
    helper = AgentDefinition(
        name="helper",
        description="answers",
        model=scripted_model(scripted_server, "child-answers"),
        system_prompt="You are the helper.",
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "parent-tasks"),
            task_queue=queue,
            tools=["read", "bash", "task"],
            agents=[helper],
        )
        await s.prompt("Delegate the work.")
        events = await s.run_to_idle(timeout=90)

    results = [e for e in events if e["type"] == "tool_execution_end" and e["toolName"] == "task"]
    assert len(results) == 2 and not any(r["isError"] for r in results)
    parallel_text = results[0]["result"]["content"][0]["text"]
    assert parallel_text.count("child answer") == 2
    details = results[0]["result"]["details"]
    assert details["mode"] == "parallel" and len(details["results"]) == 2
    for child in details["results"]:
        header = _header(child["sessionFile"])
        assert header["parentSession"] == s.config.session_path
        assert child["usage"]["output"] == 5
    # The chain handed the first answer to the second task.
    chain = results[1]["result"]["details"]["results"]
    assert [c["task"] for c in chain] == ["first step", "improve: child answer"]
    child_requests = [r.body for r in scripted_server.requests_for("child-answers")]
    assert len(child_requests) == 4
    assert any("improve: child answer" in json.dumps(b["messages"]) for b in child_requests)
    assert all("You are the helper." in json.dumps(b["messages"][0]) for b in child_requests)
    # Children do not get the task tool themselves.
    assert all("task" not in [t["function"]["name"] for t in b.get("tools", [])] for b in child_requests)
    final = [e for e in events if "subagent" not in e and e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == "All delegated."
    # The parent's watcher saw the children's own events, tagged with the child.
    child_events = [e for e in events if "subagent" in e]
    child_ids = {e["subagent"]["sessionId"] for e in child_events}
    assert child_ids == {c["sessionId"] for c in details["results"] + chain}
    answers = [e for e in child_events if e["type"] == "message_end" and e["message"]["role"] == "assistant"]
    assert len(answers) == 4 and all(e["subagent"]["agent"] == "helper" for e in answers)
    assert all(e["subagent"]["toolCallId"] == results[0]["toolCallId"] for e in child_events[:2])


async def test_aborting_the_parent_aborts_running_subagents(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    marker = tmp_path / "child-finished"
    scripted_server.add_scenario(
        "parent-slow-task",
        [{"tool_calls": [{"name": "task", "arguments": {"agent": "slow", "task": "work"}}]}],
    )
    scripted_server.add_scenario(
        "child-slow",
        [{"tool_calls": [{"name": "bash", "arguments": {"command": f"sleep 30; touch {marker}"}}]}],
    )
    slow = AgentDefinition(name="slow", model=scripted_model(scripted_server, "child-slow"))
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "parent-slow-task"),
            task_queue=queue,
            tools=["bash", "task"],
            agents=[slow],
        )
        await s.prompt("Delegate something slow.")
        await s.collect_until(lambda e: e["type"] == "tool_execution_start" and "subagent" in e)
        await s.session.abort()
        events = await s.run_to_idle(timeout=30)
    task_end = next(e for e in events if e["type"] == "tool_execution_end" and "subagent" not in e)
    assert task_end["isError"] and "aborted" in task_end["result"]["content"][0]["text"]
    child_bash = next(e for e in events if e["type"] == "tool_execution_end" and "subagent" in e)
    assert child_bash["isError"] and child_bash["subagent"]["agent"] == "slow"
    final = [e for e in events if e["type"] == "message_end" and "subagent" not in e][-1]["message"]
    assert final["stopReason"] == "aborted"
    assert not marker.exists()


async def test_a_long_subagent_continues_as_new_and_still_answers(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "parent-long-child",
        [
            {"tool_calls": [{"name": "task", "arguments": {"agent": "reader", "task": "read it often"}}]},
            {"text": "The reader is done."},
        ],
    )
    reads = [{"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]}] * 8
    scripted_server.add_scenario("child-reads", [*reads, {"text": "read 8 times"}])
    reader = AgentDefinition(
        name="reader",
        description="reads",
        model=scripted_model(scripted_server, "child-reads"),
        system_prompt="You read.",
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "parent-long-child"),
            task_queue=queue,
            tools=["read", "task"],
            agents=[reader],
            history_event_budget=40,  # children inherit it
        )
        (Path(s.config.cwd) / "notes.txt").write_text("a note\n")
        await s.prompt("Have the reader read.")
        events = await s.run_to_idle(timeout=90)
        result = next(e for e in events if e["type"] == "tool_execution_end" and "subagent" not in e)
        child = result["result"]["details"]["results"][0]
        child_runs = [
            w async for w in temporal_client.list_workflows(f'WorkflowId = "session-{child["sessionId"]}"')
        ]
    assert not result["isError"] and "read 8 times" in result["result"]["content"][0]["text"]
    assert len(child_runs) >= 2, "the child's run should have been handed off at least once"
    entries = [json.loads(line) for line in Path(child["sessionFile"]).read_text().splitlines()]
    roles = [e["message"]["role"] for e in entries if e["type"] == "message"]
    assert roles == ["user", *["assistant", "toolResult"] * 8, "assistant"]
    child_turns = [e for e in events if e.get("subagent") and e["type"] == "turn_start"]
    assert len(child_turns) == 9  # the parent's watcher followed the child across runs
