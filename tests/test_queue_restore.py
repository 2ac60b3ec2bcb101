"""Messages queued during a run come back to the user when the run is aborted (pi's Esc) or
taken back (pi's Alt+Up), instead of firing after the next prompt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue
from tests.test_attach_and_steer import LineReader


def _user_texts(session_path: str) -> list[str]:
    out: list[str] = []
    for line in Path(session_path).read_text().splitlines():
        entry: dict[str, Any] = json.loads(line)
        message = entry.get("message") or {}
        if entry.get("type") == "message" and message.get("role") == "user":
            out.extend(part["text"] for part in message["content"] if part.get("type") == "text")
    return out


async def test_abort_hands_back_the_queued_messages_and_they_never_fire(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "abort-queue",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]},
                {"text": "Answer to the new prompt."},
                {"text": "Answer to a stale queued message."},
            ],
        },
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "abort-queue"), task_queue=queue
        )
        await s.prompt("Run the slow command.")
        await s.collect_until(lambda e: e["type"] == "tool_execution_start")
        await s.session.steer("Queued steering.")
        await s.session.follow_up("Queued follow-up.")
        await s.collect_until(lambda e: e["type"] == "queue_update" and len(e["followUp"]) == 1)

        restored = await s.session.dequeue(abort=True)
        assert restored.all() == ["Queued steering.", "Queued follow-up."]
        events = await s.run_to_idle(timeout=20)
        assert [e["message"] for e in events if e["type"] == "message_end"][-1]["stopReason"] == "aborted"
        emptied = [e for e in events if e["type"] == "queue_update"]
        assert emptied and emptied[-1]["steering"] == [] and emptied[-1]["followUp"] == []

        await s.prompt("new")
        answers = [e["message"] for e in await s.run_to_idle() if e["type"] == "message_end"]
        assert answers[-1]["content"][0]["text"] == "Answer to the new prompt."
    assert len(scripted_server.requests_for("abort-queue")) == 2, "a queued message fired after the abort"
    assert _user_texts(s.config.session_path) == ["Run the slow command.", "new"]


async def test_dequeue_takes_the_queue_back_without_stopping_the_run(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "dequeue",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 2; echo done"}}]},
                {"text": "The command finished."},
                {"text": "Answer to a queued message that was taken back."},
            ],
        },
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "dequeue"), task_queue=queue
        )
        await s.prompt("Run the command.")
        await s.collect_until(lambda e: e["type"] == "tool_execution_start")
        await s.session.follow_up("First follow-up.")
        await s.session.steer("Some steering.")
        await s.session.follow_up("Second follow-up.")
        await s.collect_until(lambda e: e["type"] == "queue_update" and len(e["followUp"]) == 2)

        restored = await s.session.dequeue()
        assert restored.steering == ["Some steering."]
        assert restored.follow_up == ["First follow-up.", "Second follow-up."]
        events = await s.run_to_idle(timeout=30)
        tool_end = next(e for e in events if e["type"] == "tool_execution_end")
        assert not tool_end["isError"], "taking the queue back stopped the command"
        final = [e["message"] for e in events if e["type"] == "message_end"][-1]
        assert final["stopReason"] == "stop" and final["content"][0]["text"] == "The command finished."
        assert (await s.session.dequeue()).all() == []
    assert _user_texts(s.config.session_path) == ["Run the command."]


@pytest.mark.slow
def test_tempi_abort_prints_the_queued_messages_and_continue_answers_only_the_new_prompt(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario(
        "cli-abort-queue",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]},
                {"text": "Answer to new."},
                {"text": "Answer to the stale follow-up."},
            ],
        },
    )
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "cli-abort-queue")
    env = tempi_env(home, temporal_address)
    worker = subprocess.Popen(
        [sys.executable, "-m", "tempi", "worker"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tempi",
            "--model",
            "mock/mock-model",
            "--mode",
            "json",
            "--no-worker",
            "-p",
            "Run the slow command.",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert runner.stdout is not None
        main = LineReader(runner.stdout)
        session_id = main.wait_for(lambda e: e["type"] == "session", timeout=90)["id"]
        main.wait_for(lambda e: e["type"] == "tool_execution_start", timeout=90)
        queued = run_tempi(["follow-up", session_id, "stale follow-up", "--no-worker"], cwd=tmp_path, env=env)
        assert queued.returncode == 0, queued.stderr
        main.wait_for(lambda e: e["type"] == "queue_update" and e["followUp"] == ["stale follow-up"])

        aborted = run_tempi(["abort", session_id, "--no-worker"], cwd=tmp_path, env=env)
        assert aborted.returncode == 0, aborted.stderr
        assert runner.wait(30) != 0  # -p reports the aborted run

        answer = run_tempi(["--continue", "--no-worker", "-p", "new"], cwd=tmp_path, env=env)
        assert answer.returncode == 0, answer.stderr
        assert answer.stdout.strip() == "Answer to new.", "the stale follow-up fired after the new prompt"
        # Not lost either: `tempi abort` gave it back.
        assert aborted.stdout.strip() == "stale follow-up"
        assert "not sent" in aborted.stderr
    finally:
        for proc in (runner, worker):
            proc.terminate()
            proc.wait(10)
