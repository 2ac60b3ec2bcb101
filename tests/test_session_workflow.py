"""AgentSessionWorkflow against the real dev server and scripted LLM server: pi's loop
semantics (steering, follow-ups, abort) and the session file it leaves behind."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.fixture_paths import PI_FIXTURES
from tests.history_payloads import payload_texts
from tests.session_harness import (
    API_KEY,
    assert_single_chain,
    running_worker,
    scripted_model,
    start_session,
    unique_queue,
)


def _entries(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


async def test_steer_and_follow_up_while_a_slow_tool_runs(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario("rpc1-wf", json.loads((PI_FIXTURES / "scenarios" / "rpc1.json").read_text()))
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "rpc1-wf"), task_queue=queue
        )
        await s.prompt("Run the slow command.")
        await s.collect_until(lambda e: e["type"] == "tool_execution_start")
        await s.session.steer("Stop that and just say hi.")
        await s.session.follow_up("Then handle this follow-up.")
        await s.run_to_idle()

    # pi's order (rpc/steer-followup-compact.transcript.jsonl): both tools finish, their
    # results land in call order, then the steering message, then the follow-up.
    ends = [e["message"] for e in s.events if e["type"] == "message_end"]
    summary = [
        (m["role"], m["content"][0]["text"] if m["role"] != "assistant" else m["content"][0].get("text"))
        for m in ends
    ]
    assert summary == [
        ("user", "Run the slow command."),
        ("assistant", "Running a slow command."),
        ("toolResult", "slow-done\n"),
        ("toolResult", "second\n"),
        ("user", "Stop that and just say hi."),
        ("assistant", "OK, saying hi as you asked."),
        ("user", "Then handle this follow-up."),
        ("assistant", "Follow-up handled."),
    ]
    queue_updates = [(e["steering"], e["followUp"]) for e in s.events if e["type"] == "queue_update"]
    assert queue_updates[:2] == [
        (["Stop that and just say hi."], []),
        (["Stop that and just say hi."], ["Then handle this follow-up."]),
    ]
    assert queue_updates[-1] == ([], [])
    # The faster tool finished first even though it was listed second.
    tool_ends = [e["result"]["content"][0]["text"] for e in s.events if e["type"] == "tool_execution_end"]
    assert tool_ends == ["second\n", "slow-done\n"]
    entries = _entries(s.config.session_path)
    assert_single_chain(entries)
    roles = [e["message"]["role"] for e in entries if e["type"] == "message"]
    assert roles == [role for role, _ in summary]


async def test_abort_during_streaming_keeps_partial_text_and_session_stays_usable(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "abort-stream",
        {
            "select": "sequential",
            "turns": [
                {"text": "word " * 400, "chunk_size": 5, "chunk_delay_ms": 20},
                {"text": "Back to work."},
            ],
        },
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "abort-stream"), task_queue=queue
        )
        await s.prompt("Talk a lot.")
        await s.collect_until(lambda e: e["type"] == "message_update")
        await s.session.abort()
        first = await s.run_to_idle()
        final = [e for e in first if e["type"] == "message_end"][-1]["message"]
        assert final["stopReason"] == "aborted"
        partial = final["content"][0]["text"] if final["content"] else ""
        assert 0 < len(partial) < len("word " * 400)

        await s.prompt("Are you there?")
        second = await s.run_to_idle()
        answer = [e for e in second if e["type"] == "message_end"][-1]["message"]
        assert answer["stopReason"] == "stop"
        assert answer["content"][0]["text"] == "Back to work."
    assert_single_chain(_entries(s.config.session_path))


async def test_abort_during_a_long_tool_kills_it_and_ends_the_run(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    marker = tmp_path / "finished.txt"
    scripted_server.add_scenario(
        "abort-tool",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": f"sleep 30; touch {marker}"}}]},
                {"text": "Next prompt answered."},
            ],
        },
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "abort-tool"), task_queue=queue
        )
        await s.prompt("Run something slow.")
        await s.collect_until(lambda e: e["type"] == "tool_execution_start")
        await s.session.abort()
        events = await s.run_to_idle(timeout=20)
        tool_end = next(e for e in events if e["type"] == "tool_execution_end")
        assert tool_end["isError"]
        final = [e for e in events if e["type"] == "message_end"][-1]["message"]
        assert final["role"] == "assistant" and final["stopReason"] == "aborted"
        assert events[-1]["type"] == "agent_end"

        await s.prompt("And now?")
        answer = [e for e in await s.run_to_idle() if e["type"] == "message_end"][-1]["message"]
        assert answer["content"][0]["text"] == "Next prompt answered."
    assert not marker.exists(), "the aborted command kept running"
    assert_single_chain(_entries(s.config.session_path))


async def test_transient_errors_retry_with_events_and_then_succeed(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        # The SDK retries each call twice on its own (as pi-ai's do): 7 failures are 2 agent retries.
        "retry-429",
        [{"text": "Finally.", "fail_times": 7, "fail_status": 429, "retry_after": 0}],
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "retry-429"),
            task_queue=queue,
            retry={"enabled": True, "max_retries": 3, "base_delay_ms": 50, "max_delay_ms": 200},
        )
        await s.prompt("hello")
        events = await s.run_to_idle()
    starts = [e for e in events if e["type"] == "auto_retry_start"]
    assert [e["attempt"] for e in starts] == [1, 2]
    assert all("429" in e["errorMessage"] for e in starts)
    assert [e["delayMs"] for e in starts] == [50, 100]
    assert [e for e in events if e["type"] == "auto_retry_end"] == [
        {"type": "auto_retry_end", "success": True, "attempt": 2}
    ]
    final = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == "Finally."
    # Two failed calls of three requests each, then the third call's second request, as pi sends them.
    assert len(scripted_server.requests_for("retry-429")) == 8


async def test_api_key_never_enters_workflow_history(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "key-check", [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]}, {"text": "ok"}]
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "key-check"), task_queue=queue
        )
        await s.prompt("hello")
        await s.run_to_idle()
        history = await s.handle.fetch_history()
    exported = history.to_json()
    decoded = exported + "\n".join(payload_texts(json.loads(exported)))
    assert "echo hi" in decoded  # the payloads really were searched
    assert API_KEY not in decoded
    # ...while the key did reach the provider.
    assert scripted_server.requests_for("key-check")[0].headers["authorization"] == f"Bearer {API_KEY}"


async def test_earlier_messages_join_a_prompt_each_as_its_own_message_with_one_model_call(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    """mom's log sync: lines said before a prompt join the context as user messages of their
    own, and only the prompt runs the model."""
    scripted_server.add_scenario(
        "earlier-messages", {"turns": [{"text": "first answer"}, {"text": "second answer"}]}
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "earlier-messages"), task_queue=queue
        )
        await s.prompt("[carol]: what now?", before=["[alice]: deploy at 3", "[bob]: ok"])
        await s.run_to_idle()
        # Once the file exists, earlier messages are written ahead of the prompt all the same.
        await s.prompt("[carol]: and then?", before=["[dave]: lunch first"])
        await s.run_to_idle()
        state = await s.session.state()

    requests = [r.body for r in scripted_server.requests_for("earlier-messages")]
    assert len(requests) == 2  # no model call for the earlier messages

    def users(body: dict) -> list[str]:
        return [
            m["content"]
            if isinstance(m["content"], str)
            else "".join(p.get("text", "") for p in m["content"])
            for m in body["messages"]
            if m["role"] == "user"
        ]

    assert users(requests[0]) == ["[alice]: deploy at 3", "[bob]: ok", "[carol]: what now?"]
    assert users(requests[1])[3:] == ["[dave]: lunch first", "[carol]: and then?"]
    entries = _entries(s.config.session_path)
    assert_single_chain(entries)
    said = [
        (e["message"]["role"], e["message"]["content"][0]["text"]) for e in entries if e["type"] == "message"
    ]
    assert said == [
        ("user", "[alice]: deploy at 3"),
        ("user", "[bob]: ok"),
        ("user", "[carol]: what now?"),
        ("assistant", "first answer"),
        ("user", "[dave]: lunch first"),
        ("user", "[carol]: and then?"),
        ("assistant", "second answer"),
    ]
    assert state.message_count == 7
