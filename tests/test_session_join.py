"""A watcher joining a session (`tempi attach`, the console, `/resume`) shows the
conversation from the file and goes on with the events after it: a prompt that lands while
it joins is shown once, with its answer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from temporalio.client import Client

from tempi.client.session_join import join_session
from tempi.store.session_store import SessionStore
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows.session_workflow import AgentSessionWorkflow
from tests.session_harness import CountingHandle, running_worker, scripted_model, start_session, unique_queue

LOG_END = 1 << 62
SECOND_ANSWER = "The second answer, still being written."


def _user_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"][0]["text"] for m in messages if m["role"] == "user"]


class PromptAtLogEnd(CountingHandle):
    """The session's real handle; just before the log's end is first read, another client's
    prompt lands and its run gets going."""

    def __init__(self, handle: Any, land: Any) -> None:
        super().__init__(handle)
        self._land = land
        self.landed = False

    async def query(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        if query == AgentSessionWorkflow.read_events and args[:1] == (LOG_END,) and not self.landed:
            self.landed = True
            await self._land()
        return await super().query(query, *args, **kwargs)


async def test_a_prompt_that_lands_while_a_watcher_joins_is_shown_once_with_its_answer(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scenario = "join-while-prompted"
    scripted_server.add_scenario(
        scenario,
        [{"text": "The first answer."}, {"text": SECOND_ANSWER, "chunk_size": 6, "chunk_delay_ms": 40}],
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, scenario), task_queue=queue
        )
        await s.prompt("First prompt.")
        await s.run_to_idle()

        async def land() -> None:
            await s.prompt("Second prompt.")
            async with asyncio.timeout(30):
                while not any(
                    e["type"] == "message_start" and e["message"]["role"] == "user"
                    for e in (await s.handle.query(AgentSessionWorkflow.read_events, 0)).events[4:]
                ):
                    await asyncio.sleep(0.02)

        joining = PromptAtLogEnd(s.session.handle, land)
        s.session.handle = joining  # type: ignore[assignment]
        join = await join_session(s.session, SessionStore(tmp_path / "sessions"))
        assert joining.landed
        follower = s.session.follow(from_offset=join.from_offset, subagents=False)
        events = [e async for e in follower.events(until_idle=True)]

    shown = join.messages + [e["message"] for e in events if e["type"] == "message_end"]
    assert _user_texts(shown) == ["First prompt.", "Second prompt."]
    assert [m["content"][0]["text"] for m in shown if m["role"] == "assistant"] == [
        "The first answer.",
        SECOND_ANSWER,
    ]
