"""`python -m bench peers` without the peers installed: the scripted server's clock, the
per-turn times read from it, the table that puts each peer beside tempi, and the cached
venvs. (Installing and driving the peers is the benchmark's own run, not the suite's.)"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from statistics import median
from typing import Any

import openai
import pytest

from bench.__main__ import main as bench_main
from bench.durable_peers import compare, per_turn, print_comparison, prompt, scenario
from bench.peer_envs import PEERS, PEERS_DIR_ENV, STAMP, ensure_env, installed_versions, peers_root
from tempi.testing.scripted_llm import ScriptedLLMServer

TURNS = 3


async def converse(client: openai.AsyncOpenAI, run: str, *, stream: bool, pause_s: float) -> int:
    """An agent on the Responses API that spends `pause_s` between each answer and its next
    request; returns how many model calls it made."""
    items: list[Any] = [{"role": "user", "content": prompt(run)}]
    tools: Any = [
        {"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}}
        for name in ("read", "bash")
    ]
    for calls in range(1, 2 * TURNS):
        if stream:
            events = await client.responses.create(model="m", input=items, tools=tools, stream=True)
            response = None
            async for event in events:
                if event.type == "response.completed":
                    response = event.response
            assert response is not None
        else:
            response = await client.responses.create(model="m", input=items, tools=tools)
        tool_calls = [item for item in response.output if item.type == "function_call"]
        if not tool_calls:
            return calls
        items += [item.model_dump(exclude_none=True) for item in response.output]
        items += [{"type": "function_call_output", "call_id": c.call_id, "output": "ok"} for c in tool_calls]
        await asyncio.sleep(pause_s)  # the agent's own work between two model calls
    raise AssertionError("the scripted model never gave its final answer")


async def test_per_turn_time_is_the_agents_time_between_answer_and_next_request(tmp_path: Path) -> None:
    """The server stamps a request's arrival and its answer's end, JSON or streamed, into
    its recording; the gaps are what the agent spent, not what the model took."""
    model_delay_ms = 400
    script = scenario(TURNS)
    # The streamed run's model takes its time before every answer.
    for turn in script["routes"]["bench-run=bash"]["turns"]:
        turn["first_chunk_delay_ms"] = model_delay_ms
    record = tmp_path / "requests.jsonl"
    async with ScriptedLLMServer({"peer": script}, record_path=record) as server:
        client = openai.AsyncOpenAI(
            base_url=server.url_for("peer", "openai-responses"), api_key="t", max_retries=0
        )
        try:
            assert await converse(client, "read", stream=False, pause_s=0.03) == TURNS + 1
            assert await converse(client, "bash", stream=True, pause_s=0.06) == TURNS + 1
        finally:
            await client.close()

    gaps = per_turn(record, "peer", TURNS)
    assert len(gaps["read"]) == len(gaps["bash"]) == TURNS
    # Each gap holds the client's pause; a turn's median stays under the model's delay (a
    # single turn may not, on a loaded machine).
    assert all(gap >= 0.03 for gap in gaps["read"]) and median(gaps["read"]) < 0.03 + model_delay_ms / 1000, (
        gaps
    )
    # The model's 400 ms before each streamed answer falls outside the turn.
    assert all(gap >= 0.06 for gap in gaps["bash"]) and median(gaps["bash"]) < model_delay_ms / 1000, gaps
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert all(line["received_at"] <= line["answered_at"] for line in lines)

    with pytest.raises(RuntimeError, match=r"peer \(read\).*answered 4 model calls, expected 6"):
        per_turn(record, "peer", TURNS + 2)


def test_table_puts_each_peer_beside_tempi_with_the_ratio_and_the_temporal_round_trip(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ms = 0.001
    gaps = {
        "tempi": {"read": [10 * ms] * 9 + [20 * ms], "bash": [12 * ms] * 10},
        "openai-agents": {"read": [40 * ms] * 9 + [90 * ms], "bash": [36 * ms] * 10},
    }
    comparison = compare(gaps, {"median_ms": 5.0, "p90_ms": 7.5})
    assert comparison["openai-agents"]["read"]["ratio_median"] == 4.0
    assert comparison["openai-agents"]["bash"]["ratio_median"] == 3.0
    assert comparison["openai-agents"]["read"]["p90_ms"] == 40.0
    assert comparison["tempi"]["read"]["ratio_median"] == 1.0

    print_comparison(comparison, {"openai-agents": "Temporal OpenAI Agents"}, 10)
    rows = {line.split("  ")[1].strip(): line.split() for line in capsys.readouterr().out.splitlines()[3:]}
    assert rows["tempi"][-6:] == ["10.0", "10.0", "12.0", "12.0", "1.00", "1.00"]
    assert rows["Temporal OpenAI Agents"][-6:] == ["40.0", "40.0", "36.0", "36.0", "4.00", "3.00"]
    assert rows["Temporal alone: 1 no-op activity round trip"][-6:] == [
        "5.00",
        "7.50",
        "5.00",
        "7.50",
        "-",
        "-",
    ]


def test_a_cached_peer_venv_is_used_as_is_and_a_changed_pin_installs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PEERS_DIR_ENV, str(tmp_path / "peers"))
    root = peers_root()
    assert root == tmp_path / "peers"
    spec = PEERS[0]
    assert all("==" in requirement for spec in PEERS for requirement in spec.requirements)
    # A venv as ensure_env leaves it: an interpreter and the pins it was made with.
    venv_bin = root / spec.name / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    stamp = {"requirements": list(spec.requirements), "python": os.path.realpath(sys.executable)}
    (root / spec.name / STAMP).write_text(json.dumps(stamp))
    # No uv on PATH: a cached venv needs none.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    python = ensure_env(spec, root)
    assert python == venv_bin / "python"
    assert installed_versions(python, ("pydantic",))["pydantic"][0].isdigit()

    stamp["requirements"] = ["openai-agents==0.0.1"]
    (root / spec.name / STAMP).write_text(json.dumps(stamp))
    with pytest.raises(RuntimeError, match="uv, which is not on PATH"):
        ensure_env(spec, root)


def test_bench_help_names_the_peers_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench_main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "peers" in out and "TemporalAgent" in out and "TEMPI_BENCH_PEERS_DIR" in out
