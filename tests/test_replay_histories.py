"""Histories recorded from real sessions (tests/histories) replay on the current workflow
code: a worker that restarts mid-session, after a deploy, carries every session on
instead of failing it with a nondeterminism error. See tests/histories/README.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tempi.workers.worker import WORKFLOWS
from tempi.workers.workflow_runner import workflow_runner

HISTORIES = Path(__file__).resolve().parent / "histories"
# The worker's own runner: the sandbox restrictions are part of what must replay.
REPLAYER = Replayer(
    workflows=WORKFLOWS,
    workflow_runner=workflow_runner(pydantic_data_converter),
    data_converter=pydantic_data_converter,
)

# What was captured; a folder or file that goes missing must fail here, not shrink the test.
EXPECTED = {
    "abort_streaming": 1,
    "abort_tool": 1,
    "brief_tools": 1,
    "dequeue_abort": 1,
    "early_reads": 1,
    "docker_sandbox": 2,
    "handoff_late_local_tool_result": 3,
    "handoff_mid_run": 9,
    "handoff_to_current_build": 3,
    "manual_compaction": 1,
    "navigate_branch_summary": 1,
    "overflow_compaction": 2,
    "parallel_writes_same_path": 1,
    "pipeline_before_controls": 5,
    "pipeline_before_together": 7,
    "pipeline_before_worktree_cap": 7,
    "retry_429": 1,
    "settings_signals": 1,
    "settings_mid_run": 1,
    "settings_mid_run_before_one_chain": 1,
    "slack_before_display": 2,
    "steer_follow_up": 1,
    "subagent_abort": 2,
    "subagent_handoff": 4,
    "subagents_parallel_chain": 5,
    "local_file_tools": 1,
    "local_tool_disk_full": 1,
    "threshold_compaction": 1,
    "user_bash": 1,
}


def _histories() -> list[tuple[str, str, dict[str, str]]]:
    out: list[tuple[str, str, dict[str, str]]] = []
    for folder in sorted(p for p in HISTORIES.iterdir() if p.is_dir() and not p.name.startswith("__")):
        manifest = json.loads((folder / "manifest.json").read_text())
        files = {p.name for p in folder.glob("*.json")} - {"manifest.json"}
        assert files == {m["file"] for m in manifest}, f"{folder.name}: files and manifest disagree"
        out.extend((folder.name, m["file"], m) for m in manifest)
    return out


def test_every_scenario_was_captured() -> None:
    counts: dict[str, int] = {}
    for scenario, _file, _entry in _histories():
        counts[scenario] = counts.get(scenario, 0) + 1
    assert set(counts) == set(EXPECTED)
    for scenario, expected in EXPECTED.items():
        assert counts[scenario] >= expected, f"{scenario}: {counts[scenario]} histories, expected {expected}"


@pytest.mark.parametrize(
    ("scenario", "file", "entry"),
    _histories(),
    ids=[f"{scenario}/{file}" for scenario, file, _ in _histories()],
)
async def test_history_replays_on_the_current_code(scenario: str, file: str, entry: dict[str, str]) -> None:
    history = WorkflowHistory.from_json(entry["workflow_id"], (HISTORIES / scenario / file).read_text())
    result = await REPLAYER.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{scenario}/{file} no longer replays: {result.replay_failure!r}"
