"""Hostile tool calls from a model: arguments that are not valid Unicode (a lone surrogate
such as \\udcff) or too large for Temporal's 2 MB payloads, and tool results near that limit.

Each such call gets a tool error of its own while the turn goes on: one model request per
turn (no retries of a request that cannot succeed), the other calls of the message run,
and `--mode json` stays valid UTF-8.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from PIL import Image
from temporalio.client import Client

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import tempi_env, write_models_json
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue

HUGE = 2_500_000  # bytes of file content, over Temporal's 2 MB payload limit


def _hostile_scenario(work: Path) -> dict:
    return {
        "select": "sequential",
        "turns": [
            {
                "text": "Writing files.",
                "tool_calls": [
                    {"name": "write", "arguments": {"path": "bad\udcff.txt", "content": "x"}},
                    {"name": "bash", "arguments": {"command": "echo still-running"}},
                ],
            },
            {
                "tool_calls": [{"name": "write", "arguments": {"path": "huge.txt", "content": "y" * HUGE}}],
                "chunk_size": 256 * 1024,
            },
            {"text": "All done."},
        ],
    }


def _session_lines(path: str) -> list[dict]:
    raw = Path(path).read_bytes()
    raw.decode("utf-8")  # strict: the session file is valid UTF-8
    return [json.loads(line) for line in raw.splitlines()]


async def test_bad_tool_arguments_get_a_tool_error_and_the_turn_goes_on(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    scripted_server.add_scenario("hostile-args", _hostile_scenario(tmp_path / "work"))
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client, tmp_path, scripted_model(scripted_server, "hostile-args"), task_queue=queue
        )
        await s.prompt("Do it.")
        await asyncio.wait_for(s.run_to_idle(), 60)

    # One request per turn: nothing was retried.
    assert len(scripted_server.requests_for("hostile-args")) == 3
    ends = {e["toolCallId"]: e for e in s.events if e["type"] == "tool_execution_end"}
    in_order = [ends[e["toolCallId"]] for e in s.events if e["type"] == "tool_execution_start"]
    surrogate, still, huge = [
        (e["toolName"], e["isError"], e["result"]["content"][0]["text"]) for e in in_order
    ]
    assert surrogate[1] and "not valid Unicode" in surrogate[2]
    assert still == ("bash", False, "still-running\n")
    assert huge[1] and "MB" in huge[2] and "limit" in huge[2]
    final = [e for e in s.events if e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == "All done."
    work = tmp_path / "work"
    assert not (work / "huge.txt").exists()
    assert [p.name for p in work.iterdir()] == [], "the rejected calls must not run"
    entries = _session_lines(s.config.session_path)
    assert [e["message"]["role"] for e in entries if e["type"] == "message"] == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "assistant",
        "toolResult",
        "assistant",
    ]
    # The model sees its rejected calls replaced by the reason, never the bad arguments.
    second_request = json.dumps(scripted_server.requests_for("hostile-args")[1].body, ensure_ascii=False)
    assert "\udcff" not in second_request
    third_request = json.dumps(scripted_server.requests_for("hostile-args")[2].body)
    assert len(third_request) < 100_000


def _png(size: int) -> bytes:
    """A PNG of about `size` bytes that cannot be compressed (random pixels)."""
    side = int((size / 3) ** 0.5) + 1
    image = Image.frombytes("RGB", (side, side), os.urandom(side * side * 3))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


async def test_a_tool_result_near_the_payload_limit_reaches_the_model_whole(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    picture = _png(1_900_000)  # base64: about 2.5 MB, under the 4.5 MB image limit
    (work / "big.png").write_bytes(picture)
    scripted_server.add_scenario(
        "big-result",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "read", "arguments": {"path": "big.png"}}]},
                {"text": "Seen it."},
            ],
        },
    )
    queue = unique_queue()
    async with running_worker(temporal_client, tmp_path / "sessions", queue):
        s = await start_session(
            temporal_client,
            tmp_path,
            scripted_model(scripted_server, "big-result").model_copy(update={"input": ["text", "image"]}),
            task_queue=queue,
        )
        await s.prompt("Look at big.png.")
        await asyncio.wait_for(s.run_to_idle(), 60)
    assert len(scripted_server.requests_for("big-result")) == 2
    final = [e for e in s.events if e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == "Seen it."
    # The model received the whole image, from the parked result in the session file.
    second = json.dumps(scripted_server.requests_for("big-result")[1].body)
    assert base64.b64encode(picture).decode("ascii") in second
    results = [
        e for e in _session_lines(s.config.session_path) if e.get("message", {}).get("role") == "toolResult"
    ]
    assert len(results) == 1 and not results[0]["message"]["isError"]
    assert results[0]["message"]["content"][-1]["data"] == base64.b64encode(picture).decode("ascii")


def test_json_mode_output_stays_valid_utf8(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer
) -> None:
    scenario = {
        "select": "sequential",
        "turns": [
            {
                "text": "Reading.",
                "tool_calls": [{"name": "read", "arguments": {"path": "caf\udcff.txt"}}],
                "chunk_size": 4,
            },
            {"text": "Done."},
        ],
    }
    scripted_server.add_scenario("hostile-json", scenario)
    home = tmp_path / "home"
    work = tmp_path / "project"
    work.mkdir()
    write_models_json(home, scripted_server, "hostile-json")
    # The C locale makes Python write a lone surrogate as a raw byte (surrogateescape).
    env = tempi_env(home, temporal_address, LC_ALL="C", LANG="C")
    env.pop("PYTHONIOENCODING", None)
    env.pop("PYTHONUTF8", None)
    proc = subprocess.run(
        [sys.executable, "-m", "tempi", "--mode", "json", "--model", "mock/mock-model", "-p", "Read it."],
        cwd=work,
        env=env,
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    text = proc.stdout.decode("utf-8")  # strict: no raw 0xff or other invalid bytes
    events = [json.loads(line) for line in text.splitlines()]
    assert "\udcff" not in json.dumps(events, ensure_ascii=False).encode("utf-8", "surrogatepass").decode(
        "utf-8", "replace"
    )
    ends = [e for e in events if e["type"] == "tool_execution_end"]
    assert len(ends) == 1 and ends[0]["isError"]
    assert [e for e in events if e["type"] == "message_end"][-1]["message"]["content"][0]["text"] == "Done."
    assert len(scripted_server.requests_for("hostile-json")) == 2
