"""pi's prompt and run events for extensions, through a real `tempi -p` against the dev
server and the scripted model: what before_agent_start injects, what input does to the
user's text, how session_before_compact steers compaction, and the turn events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, trust_project_as, write_models_json
from tests.test_extensions import EXTENSIONS, _entries, _project
from tests.test_rpc_mode import RpcProcess


def test_before_agent_start_puts_a_message_into_the_conversation_after_the_prompt(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-inject"
    home, work = _project(tmp_path, scripted_server, scenario, [{"text": "Brief."}, {"text": "Again."}])
    args = ["--model", "mock/mock-model", "--extension", str(EXTENSIONS / "events.py"), "--mode", "json"]
    env = tempi_env(home, temporal_address)
    first = run_tempi([*args, "-p", "tell me"], cwd=work, env=env)
    assert first.returncode == 0, first.stderr
    events = [json.loads(line) for line in first.stdout.splitlines()]
    problems = [e for e in events if e["type"] == "extension_error"]
    assert len(problems) == 1 and "has no content" in problems[0]["error"]
    ended = [e["message"] for e in events if e["type"] == "message_end"]
    assert [m["role"] for m in ended] == ["user", "custom", "assistant"]

    # The model reads it as the user's, right after the prompt.
    sent = scripted_server.requests_for(scenario)[0].body["messages"]
    users = [json.dumps(m["content"]) for m in sent if m["role"] == "user"]
    assert "tell me" in users[-2] and "Reminder for 'tell me': be brief." in users[-1]

    # The session file keeps it, so a later run still shows it to the model.
    second = run_tempi([*args, "-c", "-p", "more"], cwd=work, env=env)
    assert second.returncode == 0, second.stderr
    kinds = [(e["type"], e.get("customType")) for e in _entries(home) if e["type"] != "session"]
    injected = [k for k in kinds if k[0] == "custom_message"]
    assert injected == [("custom_message", "reminder")] * 2
    later = json.dumps(scripted_server.requests_for(scenario)[1].body["messages"])
    assert "Reminder for 'tell me'" in later and "Reminder for 'more'" in later


def test_input_handlers_rewrite_or_swallow_what_the_user_typed_in_print_and_rpc_mode(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-input"
    home, work = _project(
        tmp_path, scripted_server, scenario, [{"text": "One."}, {"text": "Two."}, {"text": "Three."}]
    )
    extension = ["--extension", str(EXTENSIONS / "events.py")]
    env = tempi_env(home, temporal_address)
    done = run_tempi(
        ["--model", "mock/mock-model", *extension, "-p", "ping", "shout hello", "explode"], cwd=work, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Two.\n"
    assert "input hook: RuntimeError: input broke" in done.stderr
    first = scripted_server.requests_for(scenario)[0]
    assert "HELLO (via interactive)" in json.dumps(first.body["messages"])
    # "ping" never became a message; "explode" went on as typed.
    users = [e["message"] for e in _entries(home) if e.get("message", {}).get("role") == "user"]
    assert [_text_of(u["content"]) for u in users] == ["HELLO (via interactive)", "explode"]

    rpc = RpcProcess(["--model", "mock/mock-model", "--no-session", *extension], cwd=work, env=env)
    try:
        assert rpc.call({"id": "a", "type": "prompt", "message": "ping"}, timeout=90)["success"] is True
        assert rpc.call({"id": "b", "type": "prompt", "message": "shout hi"})["success"] is True
        rpc.event("agent_end")
    finally:
        rpc.close()
    requests = scripted_server.requests_for(scenario)
    assert len(requests) == 3
    assert "HI (via rpc)" in json.dumps(requests[2].body["messages"]) and "ping" not in json.dumps(
        requests[2].body["messages"]
    )


def _text_of(content: str | list[dict[str, Any]]) -> str:
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


@pytest.mark.slow
def test_session_before_compact_supplies_the_summary_and_then_cancels_a_compaction(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-compact"
    big = {"input": 1900, "output": 50}
    home, work = _project(tmp_path, scripted_server, scenario, [])
    turns = [
        {"text": "one", "usage": {"input": 100, "output": 10}},
        {"text": "two " * 50, "usage": big},
        {"text": "three", "usage": big},
        {"text": "four"},
    ]
    # In order: after a compaction the context no longer counts every earlier answer.
    scripted_server.add_scenario(scenario, {"select": "sequential", "turns": turns})
    write_models_json(home, scripted_server, scenario, context_window=2000)
    (home / "settings.json").write_text(
        json.dumps({"compaction": {"enabled": True, "reserveTokens": 500, "keepRecentTokens": 100}})
    )
    args = ["--model", "mock/mock-model", "--extension", str(EXTENSIONS / "events.py")]
    env = tempi_env(home, temporal_address)
    for more, prompt in (([], "first question"), (["-c"], "second question " + "x" * 400)):
        done = run_tempi([*args, *more, "-p", prompt], cwd=work, env=env)
        assert done.returncode == 0, done.stderr
    compactions = [e for e in _entries(home) if e["type"] == "compaction"]
    assert len(compactions) == 1 and compactions[0]["fromHook"] is True
    assert compactions[0]["summary"].startswith("Summary by the events extension:")
    assert compactions[0]["summary"].endswith("messages (threshold).")

    # The second compaction is cancelled: nothing is written, the run still ends well.
    third = run_tempi([*args, "-c", "--mode", "json", "-p", "third question"], cwd=work, env=env)
    assert third.returncode == 0, third.stderr
    ends = [e for e in map(json.loads, third.stdout.splitlines()) if e["type"] == "compaction_end"]
    assert [(e["aborted"], e.get("errorMessage")) for e in ends] == [
        (True, "An extension cancelled the compaction.")
    ]
    assert len([e for e in _entries(home) if e["type"] == "compaction"]) == 1

    fourth = run_tempi([*args, "-c", "-p", "fourth question"], cwd=work, env=env)
    assert fourth.returncode == 0, fourth.stderr
    requests = scripted_server.requests_for(scenario)
    assert [r.kind for r in requests].count("summary") == 0
    sent = json.dumps(requests[-1].body["messages"])
    assert "Summary by the events extension" in sent and "first question" not in sent


def test_turn_and_agent_end_handlers_run_on_the_worker_and_a_failing_one_is_reported(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-turns"
    turns = [
        {"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "echo hi"}}]},
        {"text": "Done."},
        {"text": "Again."},
    ]
    home, work = _project(tmp_path, scripted_server, scenario, turns)
    args = ["--model", "mock/mock-model", "--extension", str(EXTENSIONS / "turns.py"), "--mode", "json"]
    env = tempi_env(home, temporal_address)
    first = run_tempi([*args, "-p", "go"], cwd=work, env=env)
    assert first.returncode == 0, first.stderr
    problems = [e for e in map(json.loads, first.stdout.splitlines()) if e["type"] == "extension_error"]
    assert [(p["event"], "turn one broke" in p["error"]) for p in problems] == [("turn_start", True)]
    second = run_tempi([*args, "-c", "-p", "again"], cwd=work, env=env)
    assert second.returncode == 0, second.stderr

    noted = [e["data"] for e in _entries(home) if e["type"] == "custom"]
    assert noted == [
        {"event": "turn_start", "turn": 0},
        {"event": "turn_end", "turn": 0, "tools": ["c1"], "answer": ""},
        {"event": "turn_start", "turn": 1},
        {"event": "turn_end", "turn": 1, "tools": [], "answer": "Done."},
        {"event": "agent_end", "roles": ["user", "assistant", "toolResult", "assistant"]},
        # The next run counts its turns from 0 again and its messages only.
        {"event": "turn_start", "turn": 0},
        {"event": "turn_end", "turn": 0, "tools": [], "answer": "Again."},
        {"event": "agent_end", "roles": ["user", "assistant"]},
    ]


def test_extension_hooks_apply_in_a_subagent_session(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "ext-subagent"
    key = "CLEANER-AGENT-PROMPT"
    server_scenario: dict[str, Any] = {
        "turns": [
            {
                "tool_calls": [
                    {"id": "t1", "name": "task", "arguments": {"agent": "cleaner", "task": "remove victim"}}
                ]
            },
            {"text": "Parent done."},
        ],
        # The child's requests carry its agent's system prompt and follow their own script.
        "routes": {
            key: {
                "turns": [
                    {"tool_calls": [{"id": "rm", "name": "bash", "arguments": {"command": "rm -rf victim"}}]},
                    {"text": "Child could not."},
                ]
            }
        },
    }
    home, work = _project(tmp_path, scripted_server, scenario, [])
    scripted_server.add_scenario(scenario, server_scenario)
    (work / "victim").mkdir()
    (home / "agents").mkdir()
    (home / "agents" / "cleaner.md").write_text(
        f"---\nname: cleaner\ndescription: Cleans up\ntools: bash\n---\n{key}: you remove files.\n"
    )
    target = work / ".tempi" / "extensions" / "guard.py"
    target.parent.mkdir(parents=True)
    target.write_text((EXTENSIONS / "guard.py").read_text())
    trust_project_as(home, work)
    done = run_tempi(
        ["--model", "mock/mock-model", "-p", "clean up"], cwd=work, env=tempi_env(home, temporal_address)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Parent done.\n"
    assert (work / "victim").is_dir()

    files = list((home / "sessions").rglob("*.jsonl"))
    children = [f for f in files if "parentSession" in f.read_text().splitlines()[0]]
    assert len(files) == 2 and len(children) == 1
    results = [
        json.loads(line)["message"] for line in children[0].read_text().splitlines() if '"toolResult"' in line
    ]
    assert [(r["toolCallId"], r["isError"], _text_of(r["content"])) for r in results] == [
        ("rm", True, "rm -rf is not allowed here (guard extension)")
    ]
    child_requests = [r for r in scripted_server.requests_for(scenario) if r.route == key]
    assert len(child_requests) == 2
    assert "Guard rule: never delete files ('remove victim')." in json.dumps(
        child_requests[0].body["messages"][0]
    )
