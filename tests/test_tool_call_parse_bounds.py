"""A model reply that is too deep or too large to read (issue 42, item 6).

Tool-call arguments nested past MAX_JSON_DEPTH get a tool error for that call and the turn
goes on with exactly one more model request; an answer too large for Temporal's payloads is
a final error after one request, not 30 retries over four and a half minutes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from tempi.activities.llm.answer_size import MAX_ANSWER_BYTES, check_answer_size
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.tools.invalid_call import invalid_arguments_reason
from tempi.agent.json_depth import MAX_JSON_DEPTH, json_depth, text_depth
from tempi.agent.model_spec import ModelSpec
from tempi.agent.partial_message import PartialMessage, compact_delta
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.session_harness import running_worker, scripted_model, start_session, unique_queue

MODEL = ModelSpec(
    id="m",
    name="m",
    api="openai-completions",
    provider="p",
    base_url="http://127.0.0.1:9",
    context_window=1000,
)


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


# -- the bound itself ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("", 0),
        ('"[[["', 0),
        ('{"a": [1, {"b": "x]]}\\"[["}]}', 3),
        ('{"a": "unfinished [[[', 1),
        ("[" * 100_000, 100_000),
        (json.dumps({"c": "y" * 3_000_000}), 1),
    ],
)
def test_text_depth_counts_brackets_outside_strings(text: str, depth: int) -> None:
    assert text_depth(text) == depth


def test_text_depth_agrees_with_the_parsed_value() -> None:
    for depth in (1, 2, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 500):
        assert text_depth(json.dumps(_nested(depth))) == json_depth(_nested(depth)) == depth


def _stream_call(arguments_json: str, chunk: int = 7) -> tuple[MessageAssembler, int]:
    assembler = MessageAssembler(MODEL)
    index = assembler.begin_tool_call("call_1", "bash").content_index
    for start in range(0, len(arguments_json), chunk):
        event = assembler.add_tool_arguments(index, arguments_json[start : start + chunk])
        compact_delta(event)  # what the activity writes for watchers must serialize
    return assembler, index


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 500, 100_000])
def test_arguments_nested_too_deeply_are_refused_with_the_reason(depth: int) -> None:
    text = json.dumps(_nested(depth)) if depth < 900 else "[" * depth
    assembler, index = _stream_call('{"command": "echo hi", "x": ' + text + "}", chunk=4096)
    end = assembler.end_tool_call(index)
    reason = invalid_arguments_reason(end.tool_call.arguments)
    assert reason is not None and f"limit of {MAX_JSON_DEPTH} levels" in reason
    end.to_json_dict()  # nothing too deep to serialize is left


def test_arguments_at_the_depth_limit_run() -> None:
    arguments = {"command": "echo hi", "x": _nested(MAX_JSON_DEPTH - 1)}
    assembler, index = _stream_call(json.dumps(arguments))
    assert assembler.end_tool_call(index).tool_call.arguments == arguments


def test_a_watcher_replays_deep_arguments_without_recursing() -> None:
    partial = PartialMessage({"role": "assistant", "content": []})
    partial.apply(
        {"type": "toolcall_start", "contentIndex": 0, "block": {"type": "toolCall", "arguments": {}}}
    )
    for piece in ('{"x": ', "[" * 5000, "[" * 95_000):
        update = partial.apply({"type": "toolcall_delta", "contentIndex": 0, "delta": piece})
    assert update["message"]["content"][0]["arguments"] == {}


def test_an_answer_over_the_bound_fails_for_good() -> None:
    check_answer_size(MAX_ANSWER_BYTES)
    with pytest.raises(ApplicationError) as err:
        check_answer_size(3_000_000)
    assert err.value.non_retryable and "3.0 MB" in err.value.message


# -- end to end, over the scripted model ------------------------------------------------


async def _run(
    tmp_path: Path, client: Client, server: ScriptedLLMServer, name: str, turns: list[dict[str, Any]]
) -> Any:
    # Turns are picked by the number of assistant messages, so a retried request gets the
    # same hostile answer again, as it would from a real model.
    server.add_scenario(name, {"turns": turns})
    queue = unique_queue()
    async with running_worker(client, tmp_path / "sessions", queue):
        s = await start_session(client, tmp_path, scripted_model(server, name), task_queue=queue)
        await s.prompt("Do it.")
        await asyncio.wait_for(s.run_to_idle(), 60)
    return s


async def test_deeply_nested_arguments_get_a_tool_error_and_one_more_model_request(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    deep = {"command": "echo deep", "x": _nested(500)}
    s = await _run(
        tmp_path,
        temporal_client,
        scripted_server,
        "deep-args",
        [
            {
                "tool_calls": [
                    {"name": "bash", "arguments": deep},
                    {"name": "bash", "arguments": {"command": "echo still-running"}},
                ]
            },
            {"text": "All done."},
        ],
    )
    requests = scripted_server.requests_for("deep-args")
    assert len(requests) == 2
    ends = [e for e in s.events if e["type"] == "tool_execution_end"]
    assert [(e["isError"], e["result"]["content"][0]["text"][:40]) for e in ends] == [
        (True, "The arguments of this call were JSON nes"),
        (False, "still-running\n"),
    ]
    assert f"limit of {MAX_JSON_DEPTH} levels" in ends[0]["result"]["content"][0]["text"]
    final = [e for e in s.events if e["type"] == "message_end"][-1]["message"]
    assert final["content"][0]["text"] == "All done."
    # The model reads the reason in place of its call's arguments.
    second = json.dumps(requests[1].body)
    assert "not run" in second and '"a": {"a": {"a"' not in second.replace('\\"', '"')


async def test_a_3_mb_answer_is_a_final_error_after_one_model_request(
    tmp_path: Path, temporal_client: Client, scripted_server: ScriptedLLMServer
) -> None:
    s = await _run(
        tmp_path,
        temporal_client,
        scripted_server,
        "huge-answer",
        [{"text": "z" * 3_000_000, "chunk_size": 4096}, {"text": "unreached"}],
    )
    assert len(scripted_server.requests_for("huge-answer")) == 1
    final = [e for e in s.events if e["type"] == "message_end"][-1]["message"]
    assert final["stopReason"] == "error"
    assert "more than one answer may carry" in final["errorMessage"]
    assert "not retried" in final["errorMessage"]
