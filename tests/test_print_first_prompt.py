"""A new session's `tempi -p` sends its prompt straight after starting the workflow: it does
not first ask the workflow for an event log that cannot hold anything yet (a round trip and
a workflow task before the first token)."""

from __future__ import annotations

import json
from pathlib import Path

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json


def _client_calls(traces: Path) -> list[str]:
    """The client's calls to the workflow, in the order they started."""
    spans = [json.loads(line) for line in traces.read_text().splitlines()]
    calls = [
        s
        for s in spans
        if str(s["name"]).startswith(("StartWorkflow:", "QueryWorkflow:", "StartWorkflowUpdate:"))
    ]
    return [str(s["name"]).split(":")[0] for s in sorted(calls, key=lambda s: s["start_time_ns"])]


def test_a_new_sessions_prompt_follows_the_start_with_no_query_between(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    scripted_server.add_scenario("first-prompt", [{"text": "one"}, {"text": "two"}])
    write_models_json(home, scripted_server, "first-prompt")
    traces = tmp_path / "traces.jsonl"
    env = tempi_env(home, temporal_address, TEMPI_OTEL_FILE=str(traces), TEMPI_TRACE_QUERIES="1")
    proc = run_tempi(["--mode", "json", "--model", "mock/mock-model", "-p", "hi"], cwd=work, env=env)
    assert proc.returncode == 0, proc.stderr
    assert '"type":"agent_end"' in proc.stdout
    calls = _client_calls(traces)
    assert calls[:2] == ["StartWorkflow", "StartWorkflowUpdate"], calls
    assert "QueryWorkflow" in calls, "the run was never watched: the test proves nothing"
