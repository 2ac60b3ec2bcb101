"""`tempi -p` on a session whose workflow closed (its idle time ran out) between the moment
the command opened it and the moment it sent the prompt: the session goes on from its file,
as it does when the workflow had closed before, instead of failing with the server's
"workflow execution already completed"."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from tempi.cli.print_mode import run_print
from tempi.cli.session_choice import OpenSession, reopen_if_closed
from tempi.client import SessionOptions, SessionService
from tempi.store.session_store import SessionStore
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue


async def test_a_prompt_to_a_session_that_just_closed_goes_on_from_its_file(
    tmp_path: Path,
    temporal_client: Client,
    scripted_server: ScriptedLLMServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scripted_server.add_scenario("print-reopen", [{"text": "First answer."}, {"text": "Second answer."}])
    model = scripted_model(scripted_server, "print-reopen")
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(temporal_client, tmp_path, model, task_queue=queue)
        await s.prompt("one")
        await s.collect_until(lambda e: e["type"] == "agent_end")
        opened = OpenSession(s.session)  # as `tempi -c -p` holds it once it found it running
        await s.session.shutdown()  # ...and then its idle time runs out
        async with asyncio.timeout(30):
            while (await s.handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await asyncio.sleep(0.05)
        service = SessionService(temporal_client, SessionStore(tmp_path / "sessions"), queue)
        options = SessionOptions(
            cwd=str(tmp_path / "work"), model=model, system_prompt="You are a test agent."
        )

        async def reopen() -> OpenSession | None:
            return await reopen_if_closed(service, opened, options, lambda provider, model_id: model)

        code = await asyncio.wait_for(run_print(opened, ["two"], [], "text", reopen), 60)
    assert code == 0
    assert capsys.readouterr().out.strip() == "Second answer."
    messages = [
        line for line in Path(s.config.session_path).read_text().splitlines() if '"type":"message"' in line
    ]
    assert len(messages) == 4  # one, its answer, two, its answer: one file, continued
