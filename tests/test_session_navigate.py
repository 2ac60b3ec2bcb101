"""Moving to another point of the session tree, in place, with a summary of the branch
left behind (pi's /tree with summarization)."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue


async def test_navigate_with_branch_summary_then_continue_on_the_new_branch(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "navigate",
        {
            "select": "sequential",
            "summary": "## Goal\\nThe abandoned branch tried the first approach.",
            "turns": [{"text": "answer one"}, {"text": "answer two"}, {"text": "answer on the new branch"}],
        },
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "navigate"), task_queue=queue
        )
        await s.prompt("first question")
        await s.run_to_idle()
        await s.prompt("second question")
        await s.run_to_idle()
        entries = [json.loads(x) for x in Path(s.config.session_path).read_text().splitlines()]
        second_user = [e for e in entries if e.get("message", {}).get("role") == "user"][1]
        # Re-edit the second question: continue from its parent, summarizing what is left.
        result = await s.session.navigate(second_user["id"], second_user["parentId"], summarize=True)
        assert result.branch_summary_id and "first approach" in (result.summary or "")
        await s.prompt("a different second question")
        await s.run_to_idle()

    entries = [json.loads(x) for x in Path(s.config.session_path).read_text().splitlines()]
    summary = next(e for e in entries if e["type"] == "branch_summary")
    assert summary["parentId"] == second_user["parentId"]
    new_user = [e for e in entries if e.get("message", {}).get("role") == "user"][-1]
    assert new_user["parentId"] == summary["id"]
    sent = json.dumps(scripted_server.requests_for("navigate")[-1].body["messages"])
    assert "first question" in sent and "answer one" in sent  # the shared trunk
    assert '"second question"' not in sent and "answer two" not in sent  # the branch left behind...
    assert "first approach" in sent  # ...is there only as its summary
    assert "a different second question" in sent
