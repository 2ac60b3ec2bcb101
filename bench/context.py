"""What the model call's activity spends rebuilding the context, at turn 10, 100 and 1,000
of a session: the session file read (only the lines appended since the last call are
parsed), the branch walked from the leaf, the entries turned into messages, the provider's
request built (conversation repair included) and encoded as the JSON sent.

No server is involved: each size writes a session of read-tool turns in pi's format, loads
it once (a worker's store keeps what it read), then times one call after each of 20 newly
appended turns, as a running session would.

A worker runs many sessions at once, each of them calling in turn, so the second table
does the same for N sessions of 50 turns called round-robin (5 calls each): what a worker
keeps per session must hold them all, or each call starts from the file again."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from bench.report import median, print_table
from bench.rig import API, MODEL_ID, PROVIDER
from bench.sessions import model_for
from tempi.activities.llm.contract import StreamOptions
from tempi.activities.llm.conversation_cache import CONVERSATIONS
from tempi.activities.llm.openai_completions import API as API_NAME
from tempi.activities.llm.openai_completions import build_request
from tempi.agent.llm_context import LlmContext
from tempi.agent.llm_conversion import GrowingConversion
from tempi.agent.session_tree import SessionTree
from tempi.agent.tool_specs import tool_specs
from tempi.store.session_store import SessionStore

SIZES = (10, 100, 1000)
CALLS = 20
CONCURRENT = (1, 20, 100, 200)
CONCURRENT_TURNS = 50
CONCURRENT_CALLS = 5
STAGES = ("load", "branch", "messages", "request", "json")
NOTES = "".join(f"line {n}: some notes for the agent to read\n" for n in range(40))
TIMESTAMP = "2026-11-24T00:00:00.000Z"


class SessionWriter:
    """Appends read-tool turns to a pi-format session file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.next_id = 1
        self.leaf: str | None = None
        header = {
            "type": "session",
            "version": 3,
            "id": str(uuid.uuid4()),
            "timestamp": TIMESTAMP,
            "cwd": "/w",
        }
        path.write_text(json.dumps(header) + "\n")
        self._write([{"role": "user", "content": [{"type": "text", "text": "Work."}], "timestamp": 1}])

    def turns(self, count: int) -> None:
        rows: list[dict[str, Any]] = []
        for _ in range(count):
            call = f"call_{self.next_id}"
            rows.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": f"Step {self.next_id}. Reading the notes again."},
                        {"type": "toolCall", "id": call, "name": "read", "arguments": {"path": "notes.txt"}},
                    ],
                    "api": API,
                    "provider": PROVIDER,
                    "model": MODEL_ID,
                    "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
                    "stopReason": "toolUse",
                    "timestamp": 2,
                }
            )
            rows.append(
                {
                    "role": "toolResult",
                    "toolCallId": call,
                    "toolName": "read",
                    "content": [{"type": "text", "text": NOTES}],
                    "isError": False,
                    "timestamp": 3,
                }
            )
        self._write(rows)

    def _write(self, messages: list[dict[str, Any]]) -> None:
        lines = []
        for message in messages:
            entry_id = f"{self.next_id:08x}"
            lines.append(
                json.dumps(
                    {
                        "type": "message",
                        "id": entry_id,
                        "parentId": self.leaf,
                        "timestamp": TIMESTAMP,
                        "message": message,
                    }
                )
                + "\n"
            )
            self.leaf = entry_id
            self.next_id += 1
        with self.path.open("a") as f:
            f.write("".join(lines))


MODEL = model_for("http://127.0.0.1:9/v1")
TOOLS = tool_specs(["read", "bash", "edit", "write"])


def timed_rebuild(
    store: SessionStore,
    writer: SessionWriter,
    conversion_for: Callable[[SessionTree], GrowingConversion],
    session_id: str,
) -> tuple[list[float], int]:
    """One model call's context rebuilt after the writer's last turn: ms per stage (as
    STAGES) and the size of the JSON body. The session id is what the worker keeps the last
    call's conversion under, as every call of a session carries one."""
    marks = [time.perf_counter()]
    session = store.load(writer.path)
    marks.append(time.perf_counter())
    context = session.tree.build_context(writer.leaf)
    marks.append(time.perf_counter())
    messages = conversion_for(session.tree).convert(context.messages)
    marks.append(time.perf_counter())
    request = LlmContext.model_construct(system_prompt="bench", messages=messages, tools=TOOLS)
    body = build_request(MODEL, request, StreamOptions(api_key="bench", session_id=session_id))
    marks.append(time.perf_counter())
    size = len(CONVERSATIONS.encode((API_NAME, session_id), body, "messages"))
    marks.append(time.perf_counter())
    return [(end - start) * 1000 for start, end in pairwise(marks)], size


def time_calls(turns: int, tmp: Path) -> dict[str, Any]:
    path = tmp / f"session-{turns}.jsonl"
    writer = SessionWriter(path)
    writer.turns(turns)
    store = SessionStore(tmp)
    store.load(path)
    entries = writer.next_id - 1
    stages: dict[str, list[float]] = {stage: [] for stage in STAGES}
    conversion = GrowingConversion()  # as the model call's activity keeps one per session
    body_bytes = 0
    for _ in range(CALLS):
        writer.turns(1)
        times, body_bytes = timed_rebuild(store, writer, lambda _tree: conversion, f"bench-context-{turns}")
        for stage, ms in zip(STAGES, times, strict=True):
            stages[stage].append(ms)
    result: dict[str, Any] = {f"{stage}_ms": round(median(v), 3) for stage, v in stages.items()}
    result["total_ms"] = round(sum(result[f"{stage}_ms"] for stage in STAGES), 3)
    return {"turns": turns, "entries": entries, "body_kb": round(body_bytes / 1024, 1), **result}


def time_round_robin(sessions: int, tmp: Path) -> dict[str, Any]:
    """Median ms of one call's whole rebuild when `sessions` sessions call in turn."""
    store = SessionStore(tmp)
    writers = []
    for n in range(sessions):
        writer = SessionWriter(tmp / f"many-{sessions}-{n}.jsonl")
        writer.turns(CONCURRENT_TURNS)
        store.load(writer.path)
        writers.append(writer)
    # Kept per session tree, as the model call's activity keeps them (`build_llm_context`).
    conversions: WeakKeyDictionary[SessionTree, GrowingConversion] = WeakKeyDictionary()
    totals: list[float] = []
    for _ in range(CONCURRENT_CALLS):
        for n, writer in enumerate(writers):
            writer.turns(1)
            times, _ = timed_rebuild(
                store,
                writer,
                lambda tree: conversions.setdefault(tree, GrowingConversion()),
                f"bench-many-{sessions}-{n}",
            )
            totals.append(sum(times))
    return {"sessions": sessions, "total_ms": round(median(totals), 3)}


async def run(quick: bool, profile: bool = False) -> dict[str, Any]:
    del quick, profile  # it takes seconds at every size
    tmp = Path(tempfile.mkdtemp(prefix="tempi-bench-context-"))
    try:
        rows = [time_calls(turns, tmp) for turns in SIZES]
        many = [time_round_robin(sessions, tmp) for sessions in CONCURRENT]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(
        f"Rebuilding the model's context per call (ms, median of {CALLS} calls, each after one new turn)",
        ["turns", "entries", "body KB", *STAGES, "total"],
        [
            [
                r["turns"],
                r["entries"],
                r["body_kb"],
                *(f"{r[f'{stage}_ms']:.2f}" for stage in STAGES),
                f"{r['total_ms']:.2f}",
            ]
            for r in rows
        ],
    )
    first, last = rows[0], rows[-1]
    growth = last["total_ms"] / first["total_ms"] if first["total_ms"] else float("nan")
    print(f"  turn {last['turns']} costs {growth:.0f}x turn {first['turns']}")
    print_table(
        f"The same with N sessions of {CONCURRENT_TURNS} turns calling in turn "
        f"(ms per call, median of {CONCURRENT_CALLS} calls each)",
        ["sessions", "total"],
        [[r["sessions"], f"{r['total_ms']:.2f}"] for r in many],
    )
    return {"sizes": rows, "growth": round(growth, 1), "concurrent": many}
