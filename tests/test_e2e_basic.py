"""The `basic` scenario through the real CLI, worker, dev server and scripted LLM server,
compared with what pi 0.73.1 produced for the same script."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.fixture_paths import PI_FIXTURES

PROMPT = "Create hello.py that prints hello, run it, then change the greeting to hi."


def _types(lines: list[dict]) -> list[str]:
    """Event types in order; a run of streaming updates counts once, since how many
    chunks a reply arrives in is up to the server."""
    out: list[str] = []
    for e in lines:
        kind = e["type"]
        if kind in ("message_update", "tool_execution_update") and out and out[-1] == kind:
            continue
        out.append(kind)
    return out


def _load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_basic_json_mode_matches_pi(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "basic-e2e", json.loads((PI_FIXTURES / "scenarios" / "basic.json").read_text())
    )
    home = tmp_path / "home"
    work = tmp_path / "project"
    work.mkdir()
    write_models_json(home, scripted_server, "basic-e2e")
    env = tempi_env(home, temporal_address)
    proc = run_tempi(
        ["--mode", "json", "--model", "mock/mock-model", "--tools", "read,bash,edit,write", "-p", PROMPT],
        cwd=work,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    pi_events = _load_jsonl(PI_FIXTURES / "events" / "basic-openai.jsonl")

    # Same event types in the same order, header first.
    assert _types(events) == _types(pi_events)
    # The work really happened.
    assert (work / "hello.py").read_text() == "print('hi')\n"
    final = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == "Done. hello.py now prints hi."

    # The session file has pi's entry types and message shapes.
    session_files = list((home / "sessions").rglob("*.jsonl"))
    assert len(session_files) == 1
    entries = _load_jsonl(session_files[0])
    pi_entries = _load_jsonl(PI_FIXTURES / "sessions" / "basic-openai.jsonl")
    assert [e["type"] for e in entries] == [e["type"] for e in pi_entries]
    assert [e.get("message", {}).get("role") for e in entries] == [
        e.get("message", {}).get("role") for e in pi_entries
    ]
    for ours, theirs in zip(entries[1:], pi_entries[1:], strict=True):
        assert set(ours) == set(theirs)
        if "message" in ours:
            assert set(ours["message"]) - {"responseId", "details"} == set(theirs["message"]) - {
                "responseId",
                "details",
            }
    # The tree is a single chain in file order.
    for prev, entry in itertools.pairwise(entries[1:]):
        assert entry["parentId"] == prev["id"]
    assert entries[1]["parentId"] is None


def test_print_mode_prints_final_text(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario("hello-text", [{"text": "Hello from the scripted model."}])
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "hello-text")
    proc = run_tempi(
        ["--model", "mock/mock-model", "-p", "say hello"], cwd=tmp_path, env=tempi_env(home, temporal_address)
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello from the scripted model.\n"
