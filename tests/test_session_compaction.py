"""Compaction inside the session workflow: overflow recovery as pi does it, threshold
compaction after a run, manual compaction with focus text, and `enabled: false`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.fixture_paths import PI_FIXTURES
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue

SUMMARY = "## Goal\nScripted goal.\n\n## Progress\n### Done\n- [x] scripted"


def _kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events if e["type"] not in ("message_update", "tool_execution_update")]


def _pi_overflow_kinds() -> list[str]:
    out = []
    for line in (PI_FIXTURES / "rpc" / "overflow.transcript.jsonl").read_text().splitlines():
        record = json.loads(line)
        data = record["line"] if isinstance(record["line"], dict) else json.loads(record["line"])
        if record["dir"] == "out" and data.get("type") not in (
            "response",
            "message_update",
            "tool_execution_update",
        ):
            out.append(data["type"])
    return out


def _user_texts(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


async def test_overflow_compacts_once_retries_and_fails_like_pi(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "overflow-pi", json.loads((PI_FIXTURES / "scenarios" / "overflow.json").read_text())
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "overflow-pi"), task_queue=queue
        )
        await s.prompt("first")
        await s.run_to_idle()
        await s.prompt("second, this one overflows")
        await s.run_to_idle()
    assert _kinds(s.events) == _pi_overflow_kinds()
    ends = [e for e in s.events if e["type"] == "compaction_end"]
    assert ends[0]["willRetry"] is True and ends[0]["result"]["summary"]
    assert ends[1]["willRetry"] is False and "after compacting once" in ends[1]["errorMessage"]
    entries = [json.loads(line) for line in Path(s.config.session_path).read_text().splitlines()]
    assert [e["type"] for e in entries].count("compaction") == 1


async def test_overflow_recovery_retries_with_summary_and_kept_messages(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "overflow-recovers"
    scripted_server.add_scenario(
        scenario,
        {
            "select": "sequential",
            "summary": SUMMARY,
            "turns": [{"text": "ok"}, {"overflow": True}, {"text": "after compaction"}],
        },
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, scenario), task_queue=queue
        )
        await s.prompt("first")
        await s.run_to_idle()
        await s.prompt("second")
        events = await s.run_to_idle()
    final = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == "after compaction"
    retry_body = scripted_server.requests_for(scenario)[-1].body
    assert SUMMARY.splitlines()[1] in _user_texts(retry_body)
    assert [r.kind for r in scripted_server.requests_for(scenario)].count("summary") == 1


async def test_threshold_compaction_after_a_run_and_next_request_uses_summary(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "threshold"
    big_usage = {"input": 1900, "output": 50}
    scripted_server.add_scenario(
        scenario,
        {
            "select": "sequential",
            "summary": SUMMARY,
            "turns": [
                {"text": "one", "usage": {"input": 100, "output": 10}},
                {"text": "two " * 50, "usage": big_usage},
                {"text": "three"},
            ],
        },
    )
    queue = unique_queue()
    model = scripted_model(scripted_server, scenario, context_window=2000)
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            model,
            task_queue=queue,
            compaction={"enabled": True, "reserve_tokens": 500, "keep_recent_tokens": 100},
        )
        await s.prompt("first question")
        first = await s.run_to_idle()
        assert not [e for e in first if e["type"].startswith("compaction")]
        await s.prompt("second question " + "x" * 400)
        second = await s.run_to_idle()
        kinds = _kinds(second)
        assert kinds[-3:] == ["agent_end", "compaction_start", "compaction_end"]
        end = second[-1]
        assert end["reason"] == "threshold" and end["result"]["summary"].startswith("## Goal")
        await s.prompt("third question")
        await s.run_to_idle()
    last_body = scripted_server.requests_for(scenario)[-1].body
    text = _user_texts(last_body)
    assert "Scripted goal." in text
    assert "first question" not in text  # summarized away, not sent again
    assert "third question" in text


async def test_manual_compaction_with_focus_and_disabled_auto_compaction(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "manual-compact"
    scripted_server.add_scenario(
        scenario,
        {"select": "sequential", "summary": SUMMARY, "turns": [{"text": "hello"}, {"overflow": True}]},
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, scenario),
            task_queue=queue,
            compaction={"enabled": False},
        )
        await s.prompt("hi")
        await s.run_to_idle()
        result = await s.session.compact("Focus on the greetings")
        assert result.summary.startswith("## Goal")
        summary_request = next(r for r in scripted_server.requests_for(scenario) if r.kind == "summary")
        assert "Focus on the greetings" in json.dumps(summary_request.body)
        # With compaction disabled, an overflow is reported, not compacted (pi compacts anyway).
        await s.prompt("again")
        batch = await s.run_to_idle()
        events = batch[max(i for i, e in enumerate(batch) if e["type"] == "agent_start") :]
    assert not [e for e in events if e["type"].startswith("compaction")]
    final = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert final["stopReason"] == "error"
    assert [r.kind for r in scripted_server.requests_for(scenario)].count("summary") == 1
