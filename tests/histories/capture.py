"""Record workflow histories of real sessions, for tests/test_replay_histories.py.

    uv run python -m tests.histories.capture [scenario ...]

Each scenario runs against its own Temporal dev server queue, the scripted LLM server and a
real worker, then every workflow execution on that queue (continue-as-new runs and subagent
children included) is written to tests/histories/<scenario>/<n>-<WorkflowType>.json, with a
manifest.json naming each file's workflow id and run id. The scripting mirrors the
behaviour tests (test_session_workflow, test_session_compaction, test_subagents, ...).
Read tests/histories/README.md before re-capturing anything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateStage

from tempi.agent.subagents import AgentDefinition
from tempi.store.sidecar import sidecar_dir
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.dev_server import free_port, start_dev_server
from tempi.workers.temporal_client import connect
from tempi.workflows.activity_payloads import (
    BashRequest,
    BashResult,
    CompactRequest,
    CompactResult,
    DequeueRequest,
    NavigateRequest,
    NavigateResult,
)
from tempi.workflows.session_workflow import AgentSessionWorkflow
from tests.docker_support import SANDBOX_IMAGE, open_host_dir
from tests.fixture_paths import PI_FIXTURES
from tests.full_disk import full_disk_at
from tests.history_payloads import payload_texts
from tests.processes import stop_process
from tests.session_harness import API_KEY, Session, running_worker, scripted_model, start_session

HISTORIES = Path(__file__).resolve().parent
SUMMARY = "## Goal\nScripted goal.\n\n## Progress\n### Done\n- [x] scripted"


@dataclass
class Rig:
    """What one scenario runs against: its own queue, folder and scripted-server namespace."""

    name: str
    client: Client
    server: ScriptedLLMServer
    tmp: Path
    queue: str
    sessions: list[Session] = field(default_factory=list)

    def script(self, suffix: str, scenario: Any) -> str:
        # Scenario names are global to the server: prefix them so scenarios cannot collide.
        key = f"{self.name}-{suffix}"
        self.server.add_scenario(key, scenario)
        return key

    async def start(self, scenario: str, **config: Any) -> Session:
        tmp = self.tmp / f"s{len(self.sessions)}"
        s = await start_session(
            self.client, tmp, scripted_model(self.server, scenario), task_queue=self.queue, **config
        )
        self.sessions.append(s)
        return s


Scenario = Callable[[Rig], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}
NEEDS_DOCKER = {"docker_sandbox"}


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


@scenario
async def steer_follow_up(rig: Rig) -> None:
    key = rig.script("rpc1", json.loads((PI_FIXTURES / "scenarios" / "rpc1.json").read_text()))
    s = await rig.start(key)
    await s.prompt("Run the slow command.")
    await s.collect_until(lambda e: e["type"] == "tool_execution_start")
    await s.handle.signal(AgentSessionWorkflow.steer, "Stop that and just say hi.")
    await s.handle.signal(AgentSessionWorkflow.follow_up, "Then handle this follow-up.")
    await s.run_to_idle()


@scenario
async def abort_streaming(rig: Rig) -> None:
    key = rig.script(
        "stream",
        {
            "select": "sequential",
            "turns": [
                {"text": "word " * 200, "chunk_size": 5, "chunk_delay_ms": 20},
                {"text": "Back to work."},
            ],
        },
    )
    s = await rig.start(key)
    await s.prompt("Talk a lot.")
    await s.collect_until(lambda e: e["type"] == "message_update")
    await s.handle.signal(AgentSessionWorkflow.abort)
    await s.run_to_idle()
    await s.prompt("Are you there?")
    await s.run_to_idle()


@scenario
async def abort_tool(rig: Rig) -> None:
    key = rig.script(
        "tool",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]},
                {"text": "Next prompt answered."},
            ],
        },
    )
    s = await rig.start(key)
    await s.prompt("Run something slow.")
    await s.collect_until(lambda e: e["type"] == "tool_execution_start")
    await s.handle.signal(AgentSessionWorkflow.abort)
    await s.run_to_idle(timeout=20)
    await s.prompt("And now?")
    await s.run_to_idle()


@scenario
async def dequeue_abort(rig: Rig) -> None:
    key = rig.script(
        "dequeue",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 2"}}]},
                {"text": "Done."},
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]},
                {"text": "Next prompt answered."},
            ],
        },
    )
    s = await rig.start(key)
    await s.prompt("Run something.")
    await s.collect_until(lambda e: e["type"] == "tool_execution_start")
    await s.handle.signal(AgentSessionWorkflow.steer, "Taken back.")
    await s.handle.signal(AgentSessionWorkflow.follow_up, "Taken back too.")
    await s.handle.execute_update(AgentSessionWorkflow.dequeue, DequeueRequest())
    await s.run_to_idle()
    await s.prompt("Run something slow.")
    await s.collect_until(lambda e: e["type"] == "tool_execution_start")
    await s.handle.signal(AgentSessionWorkflow.follow_up, "Stale.")
    await s.handle.execute_update(AgentSessionWorkflow.dequeue, DequeueRequest(abort=True))
    await s.run_to_idle(timeout=20)
    await s.prompt("And now?")
    await s.run_to_idle()


@scenario
async def retry_429(rig: Rig) -> None:
    key = rig.script("429", [{"text": "Finally.", "fail_times": 2, "fail_status": 429, "retry_after": 0}])
    s = await rig.start(
        key, retry={"enabled": True, "max_retries": 3, "base_delay_ms": 50, "max_delay_ms": 200}
    )
    await s.prompt("hello")
    await s.run_to_idle()


@scenario
async def overflow_compaction(rig: Rig) -> None:
    # One session recovers after compacting; pi's recorded one overflows again and fails.
    recovers = rig.script(
        "recovers",
        {
            "select": "sequential",
            "summary": SUMMARY,
            "turns": [{"text": "ok"}, {"overflow": True}, {"text": "after compaction"}],
        },
    )
    pi = rig.script("pi", json.loads((PI_FIXTURES / "scenarios" / "overflow.json").read_text()))
    for key, second in ((recovers, "second"), (pi, "second, this one overflows")):
        s = await rig.start(key)
        await s.prompt("first")
        await s.run_to_idle()
        await s.prompt(second)
        await s.run_to_idle()


@scenario
async def threshold_compaction(rig: Rig) -> None:
    key = rig.script(
        "threshold",
        {
            "select": "sequential",
            "summary": SUMMARY,
            "turns": [
                {"text": "one", "usage": {"input": 100, "output": 10}},
                {"text": "two " * 50, "usage": {"input": 1900, "output": 50}},
                {"text": "three"},
            ],
        },
    )
    s = await start_session(
        rig.client,
        rig.tmp / "s0",
        scripted_model(rig.server, key, context_window=2000),
        task_queue=rig.queue,
        compaction={"enabled": True, "reserve_tokens": 500, "keep_recent_tokens": 100},
    )
    rig.sessions.append(s)
    await s.prompt("first question")
    await s.run_to_idle()
    await s.prompt("second question " + "x" * 400)
    await s.collect_until(lambda e: e["type"] == "compaction_end")
    await s.prompt("third question")
    await s.run_to_idle()


@scenario
async def manual_compaction(rig: Rig) -> None:
    key = rig.script(
        "manual",
        {"select": "sequential", "summary": SUMMARY, "turns": [{"text": "hello"}, {"overflow": True}]},
    )
    s = await rig.start(key, compaction={"enabled": False})
    await s.prompt("hi")
    await s.run_to_idle()
    await s.handle.execute_update(
        AgentSessionWorkflow.compact,
        CompactRequest(custom_instructions="Focus on the greetings"),
        result_type=CompactResult,
    )
    # With compaction disabled, the overflow is reported, not compacted.
    await s.prompt("again")
    await s.run_to_idle()
    await s.handle.signal(AgentSessionWorkflow.set_auto_compaction, True)


@scenario
async def parallel_writes_same_path(rig: Rig) -> None:
    key = rig.script(
        "writes",
        [
            {
                "tool_calls": [
                    {"name": "write", "arguments": {"path": "same.txt", "content": "first\n"}},
                    {"name": "write", "arguments": {"path": "same.txt", "content": "second\n"}},
                    {"name": "read", "arguments": {"path": "same.txt"}},
                ]
            },
            {"text": "Both written."},
        ],
    )
    s = await rig.start(key)
    await s.prompt("Write the file twice.")
    await s.run_to_idle()


@scenario
async def local_tool_disk_full(rig: Rig) -> None:
    """A local write whose result cannot be parked (the side folder's disk is full) is a tool
    error and the session goes on (the `local-tool-failure-is-a-result` patch), then a write
    once there is space again."""
    key = rig.script(
        "full",
        [
            {"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "one\n"}}]},
            {"text": "The disk was full."},
            {"tool_calls": [{"name": "write", "arguments": {"path": "b.txt", "content": "two\n"}}]},
            {"text": "b.txt written."},
        ],
    )
    s = await rig.start(key)
    with full_disk_at(sidecar_dir(s.config.session_path, s.config.session_id) / "pending") as filler:
        await s.prompt("Write a.txt.")
        await s.run_to_idle()
        filler.unlink()
        await s.prompt("Now write b.txt.")
        await s.run_to_idle()


@scenario
async def local_file_tools(rig: Rig) -> None:
    """read, write, edit and ls as local activities (the `local-file-tools` patch) beside
    grep, find and bash, which stay activities, then an abort of a slow bash."""
    key = rig.script(
        "files",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "one\n"}}]},
                {
                    "tool_calls": [
                        {
                            "name": "edit",
                            "arguments": {"path": "a.txt", "edits": [{"oldText": "one", "newText": "two"}]},
                        },
                        {"name": "read", "arguments": {"path": "a.txt"}},
                    ]
                },
                {
                    "tool_calls": [
                        {"name": "ls", "arguments": {}},
                        {"name": "grep", "arguments": {"pattern": "two"}},
                    ]
                },
                {
                    "tool_calls": [
                        {"name": "find", "arguments": {"pattern": "*.txt"}},
                        {"name": "bash", "arguments": {"command": "cat a.txt"}},
                    ]
                },
                {"text": "The file says two."},
                {"tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}]},
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]},
                {"text": "Next prompt answered."},
            ],
        },
    )
    s = await rig.start(key, tools=["read", "bash", "edit", "write", "ls", "grep", "find"])
    await s.prompt("Work on a.txt.")
    await s.run_to_idle()
    await s.prompt("Read it again, then wait.")
    await s.collect_until(lambda e: e["type"] == "tool_execution_start" and e.get("toolName") == "bash")
    await s.handle.signal(AgentSessionWorkflow.abort)
    await s.run_to_idle(timeout=20)
    await s.prompt("And now?")
    await s.run_to_idle()


@scenario
async def brief_tools(rig: Rig) -> None:
    """bash, grep and find started in the workflow task (the `brief-tools-in-the-workflow-task`
    patch): quick calls, a slow bash awaited on the worker's own queue, then an abort of a
    slow bash within its first moment and one after it."""
    key = rig.script(
        "brief",
        {
            "select": "sequential",
            "turns": [
                {
                    "tool_calls": [
                        {"name": "bash", "arguments": {"command": "echo quick > a.txt"}},
                        {"name": "grep", "arguments": {"pattern": "quick"}},
                        {"name": "find", "arguments": {"pattern": "*.txt"}},
                    ]
                },
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 1; echo slow"}}]},
                {"text": "Both ran."},
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]},
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]},
                {"text": "Next prompt answered."},
            ],
        },
    )
    s = await rig.start(key, tools=["read", "bash", "grep", "find"])
    await s.prompt("Run the commands.")
    await s.run_to_idle()
    await s.prompt("Wait, and be stopped at once.")
    await s.handle.signal(AgentSessionWorkflow.abort)
    await s.run_to_idle(timeout=20)
    await s.prompt("Wait, and be stopped later.")
    await s.collect_until(lambda e: e["type"] == "tool_execution_start" and e.get("toolName") == "bash")
    await asyncio.sleep(1)
    await s.handle.signal(AgentSessionWorkflow.abort)
    await s.run_to_idle(timeout=20)
    await s.prompt("And now?")
    await s.run_to_idle()


@scenario
async def early_reads(rig: Rig) -> None:
    """Answers that only read, run by the model call's activity (the `reads-in-the-model-call`
    patch): two reads and an ls, a read of a missing file, then a read beside a command (run
    in the workflow task as before), and a second prompt reading again."""
    key = rig.script(
        "early",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "one\n"}}]},
                {
                    "tool_calls": [
                        {"name": "read", "arguments": {"path": "a.txt"}},
                        {"name": "read", "arguments": {"path": "a.txt", "offset": 1}},
                        {"name": "ls", "arguments": {}},
                    ]
                },
                {"tool_calls": [{"name": "read", "arguments": {"path": "missing.txt"}}]},
                {
                    "tool_calls": [
                        {"name": "read", "arguments": {"path": "a.txt"}},
                        {"name": "bash", "arguments": {"command": "cat a.txt"}},
                    ]
                },
                {"text": "a.txt says one."},
                {"tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}]},
                {"text": "Still one."},
            ],
        },
    )
    s = await rig.start(key, tools=["read", "bash", "write", "ls"])
    await s.prompt("Look at a.txt.")
    await s.run_to_idle()
    await s.prompt("Again.")
    await s.run_to_idle()


@scenario
async def user_bash(rig: Rig) -> None:
    key = rig.script("bash", {"select": "sequential", "turns": [{"text": "I saw your command."}]})
    s = await rig.start(key)
    await s.handle.execute_update(
        AgentSessionWorkflow.bash, BashRequest(command="echo from the user"), result_type=BashResult
    )
    await s.handle.execute_update(
        AgentSessionWorkflow.bash,
        BashRequest(command="echo private", exclude_from_context=True),
        result_type=BashResult,
    )
    slow = await s.handle.start_update(
        AgentSessionWorkflow.bash,
        BashRequest(command="sleep 30"),
        wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        result_type=BashResult,
    )
    await asyncio.sleep(1)  # let the command start, so abort_bash cancels a running activity
    await s.handle.signal(AgentSessionWorkflow.abort_bash)
    result = await asyncio.wait_for(slow.result(), 20)
    assert result.cancelled, result
    await s.prompt("What did I run?")
    await s.run_to_idle()


@scenario
async def navigate_branch_summary(rig: Rig) -> None:
    key = rig.script(
        "navigate",
        {
            "select": "sequential",
            "summary": "## Goal\nThe abandoned branch tried the first approach.",
            "turns": [{"text": "answer one"}, {"text": "answer two"}, {"text": "answer on the new branch"}],
        },
    )
    s = await rig.start(key)
    await s.prompt("first question")
    await s.run_to_idle()
    await s.prompt("second question")
    await s.run_to_idle()
    entries = [json.loads(x) for x in Path(s.config.session_path).read_text().splitlines()]
    second_user = [e for e in entries if e.get("message", {}).get("role") == "user"][1]
    await s.handle.execute_update(
        AgentSessionWorkflow.navigate,
        NavigateRequest(target_id=second_user["id"], new_leaf_id=second_user["parentId"], summarize=True),
        result_type=NavigateResult,
    )
    await s.prompt("a different second question")
    await s.run_to_idle()
    # And a move without a summary.
    await s.handle.execute_update(
        AgentSessionWorkflow.navigate,
        NavigateRequest(target_id=second_user["parentId"], new_leaf_id=second_user["parentId"]),
        result_type=NavigateResult,
    )


@scenario
async def docker_sandbox(rig: Rig) -> None:
    parent = rig.script(
        "tools",
        [
            {"tool_calls": [{"name": "write", "arguments": {"path": "hello.txt", "content": "boxed\n"}}]},
            {"tool_calls": [{"name": "bash", "arguments": {"command": "id -u; pwd; cat hello.txt"}}]},
            {"tool_calls": [{"name": "task", "arguments": {"agent": "coder", "task": "add a file"}}]},
            {"text": "done"},
        ],
    )
    child = rig.script(
        "child",
        [
            {"tool_calls": [{"name": "write", "arguments": {"path": "added.py", "content": "print(1)\n"}}]},
            {"text": "added added.py"},
        ],
    )
    coder = AgentDefinition(name="coder", model=scripted_model(rig.server, child))
    s = await rig.start(
        parent,
        tools=["read", "bash", "edit", "write", "task"],
        agents=[coder],
        sandbox="docker",
        sandbox_image=SANDBOX_IMAGE,
    )
    open_host_dir(Path(s.config.cwd))
    await s.prompt("work in the sandbox")
    await s.run_to_idle(timeout=120)
    await s.handle.execute_update(
        AgentSessionWorkflow.bash, BashRequest(command="ls"), result_type=BashResult
    )


@scenario
async def subagents_parallel_chain(rig: Rig) -> None:
    parent = rig.script(
        "parent",
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
    child = rig.script("child", [{"text": "child answer", "usage": {"input": 10, "output": 5}}])
    helper = AgentDefinition(
        name="helper",
        description="answers",
        model=scripted_model(rig.server, child),
        system_prompt="You are the helper.",
    )
    s = await rig.start(parent, tools=["read", "bash", "task"], agents=[helper])
    await s.prompt("Delegate the work.")
    await s.run_to_idle(timeout=90)


@scenario
async def subagent_abort(rig: Rig) -> None:
    parent = rig.script(
        "parent", [{"tool_calls": [{"name": "task", "arguments": {"agent": "slow", "task": "work"}}]}]
    )
    child = rig.script("child", [{"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]}])
    slow = AgentDefinition(name="slow", model=scripted_model(rig.server, child))
    s = await rig.start(parent, tools=["bash", "task"], agents=[slow])
    await s.prompt("Delegate something slow.")
    await s.collect_until(lambda e: e["type"] == "tool_execution_start" and "subagent" in e)
    await s.handle.signal(AgentSessionWorkflow.abort)
    await s.run_to_idle(timeout=30)


@scenario
async def subagent_handoff(rig: Rig) -> None:
    parent = rig.script(
        "parent",
        [
            {"tool_calls": [{"name": "task", "arguments": {"agent": "reader", "task": "read it often"}}]},
            {"text": "The reader is done."},
        ],
    )
    reads = [{"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]}] * 8
    child = rig.script("child", [*reads, {"text": "read 8 times"}])
    reader = AgentDefinition(
        name="reader", description="reads", model=scripted_model(rig.server, child), system_prompt="You read."
    )
    s = await rig.start(parent, tools=["read", "task"], agents=[reader], history_event_budget=40)
    (Path(s.config.cwd) / "notes.txt").write_text("a note\n")
    await s.prompt("Have the reader read.")
    await s.run_to_idle(timeout=90)


@scenario
async def handoff_mid_run(rig: Rig) -> None:
    reads = [{"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]}] * 12
    mid = rig.script(
        "mid", {"select": "sequential", "turns": [*reads, {"text": "read them all"}, {"text": "followed up"}]}
    )
    s = await rig.start(mid, history_event_budget=40)
    (Path(s.config.cwd) / "notes.txt").write_text("a note\n")
    await s.prompt("Read the notes many times.")
    await s.handle.signal(AgentSessionWorkflow.follow_up, "One more thing.")  # queued across the hand-offs
    await s.run_to_idle()
    # And hand-offs between prompts.
    between = rig.script(
        "between", {"select": "sequential", "turns": [{"text": f"answer {i}"} for i in range(3)]}
    )
    s = await rig.start(between, history_event_budget=10)
    for i in range(3):
        await s.prompt(f"question {i}")
        await s.run_to_idle()


@scenario
async def handoff_to_current_build(rig: Rig) -> None:
    """Hand-offs between prompts that ask for the deployment's current build (the
    upgrade-at-continue-as-new patch); the worker here is unversioned, as in one process."""
    key = rig.script(
        "answers", {"select": "sequential", "turns": [{"text": f"answer {i}"} for i in range(2)]}
    )
    s = await rig.start(key, history_event_budget=10)
    for i in range(2):
        await s.prompt(f"question {i}")
        await s.run_to_idle()


@scenario
async def settings_signals(rig: Rig) -> None:
    key = rig.script("settings", {"select": "sequential", "turns": [{"text": "one"}, {"text": "two"}]})
    s = await rig.start(key)
    await s.prompt("first")
    await s.run_to_idle()
    other = scripted_model(rig.server, key).model_copy(update={"id": "mock-model-2", "name": "mock-model-2"})
    await s.handle.signal(AgentSessionWorkflow.set_model, other)
    await s.handle.signal(AgentSessionWorkflow.set_thinking_level, "high")
    await s.handle.signal(AgentSessionWorkflow.set_session_name, "renamed session")
    await s.handle.signal(AgentSessionWorkflow.set_auto_retry, False)
    await s.handle.signal(AgentSessionWorkflow.set_steering_mode, "all")
    await s.handle.signal(AgentSessionWorkflow.set_follow_up_mode, "all")
    await s.prompt("second")
    await s.run_to_idle()


@scenario
async def settings_mid_run(rig: Rig) -> None:
    # The command waits for a file written once the workflow has taken the signals.
    command = "while [ ! -e go ]; do sleep 0.02; done; echo ran"
    key = rig.script(
        "mid-run",
        {
            "select": "sequential",
            "turns": [
                {"text": "word " * 100, "chunk_size": 5, "chunk_delay_ms": 20},
                {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]},
                {"text": "The command ran."},
            ],
        },
    )
    s = await rig.start(key)
    await s.prompt("Talk a while.")
    await s.collect_until(lambda e: e["type"] == "message_update")
    await s.handle.signal(AgentSessionWorkflow.set_session_name, "renamed while streaming")
    await s.run_to_idle()
    await s.prompt("Run the command.")
    await s.collect_until(lambda e: e["type"] == "tool_execution_start")
    other = scripted_model(rig.server, key).model_copy(update={"id": "mock-model-2", "name": "mock-model-2"})
    await s.handle.signal(AgentSessionWorkflow.set_model, other)
    await s.handle.signal(AgentSessionWorkflow.set_thinking_level, "high")
    await s.handle.signal(AgentSessionWorkflow.set_session_name, "renamed while a tool runs")
    await s.collect_until(
        lambda e: e["type"] == "session_info_changed" and e["name"] == "renamed while a tool runs"
    )
    (Path(s.config.cwd) / "go").touch()
    await s.run_to_idle()


# --- recording ----------------------------------------------------------------------------


async def _shut_down(rig: Rig) -> None:
    """End every session, so each history closes instead of stopping mid-wait."""
    for s in rig.sessions:
        await s.handle.signal(AgentSessionWorkflow.shutdown)
    for s in rig.sessions:
        await asyncio.wait_for(s.handle.result(), 60)


async def _executions(client: Client, queue: str) -> list[Any]:
    # Visibility trails the executions a little: wait until all are closed and the count settles.
    deadline = time.monotonic() + 30
    previous = -1
    while True:
        found = [w async for w in client.list_workflows(f"TaskQueue = '{queue}'")]
        settled = len(found) == previous and all(w.status != WorkflowExecutionStatus.RUNNING for w in found)
        if settled or time.monotonic() > deadline:
            return sorted(found, key=lambda w: (w.start_time, w.id, w.run_id))
        previous = len(found)
        await asyncio.sleep(1)


async def capture(name: str, client: Client, server: ScriptedLLMServer, tmp: Path) -> int:
    rig = Rig(name, client, server, tmp / name, f"hist-{name}")
    async with running_worker(client, rig.tmp / "sessions", rig.queue, host_sandboxes=name in NEEDS_DOCKER):
        await SCENARIOS[name](rig)
        await _shut_down(rig)
        executions = await _executions(client, rig.queue)
    return await save_histories(client, executions, HISTORIES / name, name)


async def save_histories(
    client: Client, executions: list[Any], out: Path, label: str, secret: str = API_KEY
) -> int:
    """Write each execution's history to `out` as `<n>-<WorkflowType>.json`, with
    `manifest.json`; refuses a history holding `secret` (the scripted API key). How many it
    wrote."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    manifest = []
    for n, execution in enumerate(executions, 1):
        history = await client.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
        exported = history.to_json()
        if secret in exported or any(secret in text for text in payload_texts(json.loads(exported))):
            raise RuntimeError(f"{label}: the API key reached the history of {execution.id}")
        file = f"{n}-{execution.workflow_type}.json"
        (out / file).write_text(exported)
        manifest.append(
            {
                "file": file,
                "workflow_id": execution.id,
                "run_id": execution.run_id,
                "workflow_type": execution.workflow_type,
                "status": execution.status.name if execution.status else None,
            }
        )
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return len(manifest)


async def main(names: list[str]) -> None:
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        sys.exit(f"unknown scenarios: {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    tmp = Path(tempfile.mkdtemp(prefix="tempi-capture-"))
    port = free_port()
    proc = start_dev_server(tmp / "temporal.db", port, log_path=tmp / "temporal.log")
    server = ScriptedLLMServer()
    server.start_in_thread()
    try:
        client = await connect(f"127.0.0.1:{port}")
        for name in names or list(SCENARIOS):
            started = time.monotonic()
            count = await capture(name, client, server, tmp)
            print(f"{name}: {count} histories in {time.monotonic() - started:.1f} s", flush=True)
    finally:
        server.stop_thread()
        stop_process(proc)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenarios", nargs="*", help=f"default: all of {', '.join(SCENARIOS)}")
    asyncio.run(main(parser.parse_args().scenarios))
