"""A watcher of a streaming answer asks the workflow a bounded number of times.

Token deltas reach watchers through the live side file; the workflow's event log is read
with a query, which the session's worker must answer. A watcher that asked again after
every batch of deltas would ask hundreds of times a second while a model streams, for
each watcher, taking the worker's time from the turns it runs.
"""

from __future__ import annotations

import time
from pathlib import Path

from temporalio.client import Client

from tempi.agent.partial_message import PartialMessage
from tempi.client.events import QUERY_EVERY_S
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.session_harness import CountingHandle, running_worker, scripted_model, start_session, unique_queue

WORDS = 600


async def test_a_watcher_sees_every_delta_without_asking_after_each(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    text = " ".join(f"w{i}" for i in range(WORDS))
    scenario = "watch-a-long-stream"
    # A delta every 3 ms for about two seconds: news on nearly every look at the live file.
    scripted_server.add_scenario(scenario, [{"text": text, "chunk_size": 4, "chunk_delay_ms": 3}])
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, scenario), task_queue=queue
        )
        counting = CountingHandle(s.follower.handle)
        s.follower.handle = counting  # type: ignore[assignment]
        await s.prompt("Say the words.")
        started = time.monotonic()
        events = await s.run_to_idle(timeout=60)
        seconds = time.monotonic() - started

    updates = [e for e in events if e["type"] == "message_update" and e["message"]["role"] == "assistant"]
    final = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == text
    assert (
        "".join(
            e["assistantMessageEvent"].get("delta", "")
            for e in updates
            if e["assistantMessageEvent"]["type"] == "text_delta"
        )
        == text
    )
    # Seen as it streamed, not in one piece at the end.
    assert len(updates) > 20
    assert counting.queries <= seconds / QUERY_EVERY_S + 20, (counting.queries, round(seconds, 2))


def test_a_stream_read_in_part_is_completed_from_the_final_message() -> None:
    """What a watcher shows when the live file went before it read the tail: the deltas it
    saw, then the rest of each block, so the text and the calls come out whole."""
    final = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Plan: read then answer."},
            {"type": "text", "text": "Reading the file now."},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.py"}},
        ],
    }
    partial = PartialMessage({"role": "assistant", "content": []})
    seen = [
        {"type": "thinking_start", "contentIndex": 0, "block": {"type": "thinking", "thinking": ""}},
        {"type": "thinking_delta", "contentIndex": 0, "delta": "Plan: read then answer."},
        {"type": "thinking_end", "contentIndex": 0, "content": "Plan: read then answer."},
        {"type": "text_start", "contentIndex": 1, "block": {"type": "text", "text": ""}},
        {"type": "text_delta", "contentIndex": 1, "delta": "Reading the"},
    ]
    for delta in seen:
        partial.apply(delta)
    rest = partial.catch_up(final)
    assert [d["type"] for d in rest] == [
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
    ]
    assert rest[0]["delta"] == " file now."
    last = [partial.apply(d) for d in rest][-1]
    assert last["message"]["content"] == final["content"]
