"""The scripted LLM server, driven by the official OpenAI and Anthropic SDKs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from tempi.activities.llm.http_pool import shared_http_client
from tempi.testing.scripted_llm import (
    Scenario,
    ScenarioError,
    ScriptedLLMServer,
    ScriptedTurn,
)
from tempi.testing.scripted_llm.__main__ import main as cli_main

TOOL_TURN: dict[str, Any] = {
    "text": "Writing two files at once.",
    "tool_calls": [
        {"name": "write", "arguments": {"path": "hello.py", "content": "print('hello')\n"}},
        {"name": "edit", "arguments": {"path": "b.txt", "edits": [{"oldText": "a", "newText": "b"}]}},
    ],
}
# Typed loosely: the SDKs accept plain dicts at run time, their TypedDicts are for callers.
USER: Any = [{"role": "user", "content": "go"}]


def recorded_body(fixtures_dir: Path, name: str) -> Any:
    """The body of a request pi sent, from the recorded llm-requests fixtures."""
    return json.loads((fixtures_dir / "llm-requests" / name).read_text())["body"]


@pytest.fixture
async def server() -> AsyncIterator[ScriptedLLMServer]:
    async with ScriptedLLMServer() as running:
        yield running


# The clients share tempi's pools, as tempi's providers do, so none is left for the
# garbage collector to close.
def openai_client(
    server: ScriptedLLMServer, scenario: str, api: str = "openai-completions"
) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=server.url_for(scenario, api),
        api_key="test",
        max_retries=0,
        http_client=shared_http_client(openai.DefaultAsyncHttpxClient),
    )


def anthropic_client(server: ScriptedLLMServer, scenario: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=server.url_for(scenario, "anthropic-messages"),
        api_key="test",
        max_retries=0,
        http_client=shared_http_client(anthropic.DefaultAsyncHttpxClient),
    )


# -- streaming over each wire protocol ----------------------------------------------------


async def test_openai_chat_streams_text_thinking_tool_calls_and_usage(server: ScriptedLLMServer) -> None:
    server.add_scenario("chat", [{**TOOL_TURN, "thinking": "Two files, one turn.", "chunk_size": 5}])
    client = openai_client(server, "chat")
    stream = await client.chat.completions.create(
        model="m", messages=USER, stream=True, stream_options={"include_usage": True}
    )
    text_deltas: list[str] = []
    reasoning = ""
    arguments: dict[int, str] = {}
    names: dict[int, str] = {}
    argument_chunks = 0
    finish = None
    usage = None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            text_deltas.append(delta.content)
        reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
        for call in delta.tool_calls or []:
            if call.function and call.function.name:
                names[call.index] = call.function.name
                assert call.id is not None and call.id.startswith(f"call_{call.index}_")
            piece = (call.function and call.function.arguments) or ""
            argument_chunks += bool(piece)
            arguments[call.index] = arguments.get(call.index, "") + piece
        finish = chunk.choices[0].finish_reason or finish

    assert len(text_deltas) > 1
    assert "".join(text_deltas) == TOOL_TURN["text"]
    assert reasoning == "Two files, one turn."
    assert names == {0: "write", 1: "edit"}
    assert argument_chunks > 4
    assert [json.loads(arguments[i]) for i in (0, 1)] == [
        call["arguments"] for call in TOOL_TURN["tool_calls"]
    ]
    assert finish == "tool_calls"
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (100, 20, 120)


async def test_openai_chat_stream_helper_assembles_the_message(server: ScriptedLLMServer) -> None:
    server.add_scenario("helper", [TOOL_TURN])
    async with openai_client(server, "helper").chat.completions.stream(model="m", messages=USER) as stream:
        completion = await stream.get_final_completion()
    message = completion.choices[0].message
    assert message.content == TOOL_TURN["text"]
    assert [json.loads(call.function.arguments) for call in message.tool_calls or []] == [
        call["arguments"] for call in TOOL_TURN["tool_calls"]
    ]


async def test_anthropic_streams_thinking_with_signature_text_and_tool_use(server: ScriptedLLMServer) -> None:
    server.add_scenario(
        "claude",
        [
            {
                **TOOL_TURN,
                "thinking": "Plan the two writes.",
                "usage": {"input": 7, "output": 9, "cacheRead": 50},
            }
        ],
    )
    client = anthropic_client(server, "claude")
    text_deltas = 0
    json_deltas = 0
    async with client.messages.stream(model="c", max_tokens=100, messages=USER) as stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text_deltas += 1
            if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                json_deltas += 1
        message = await stream.get_final_message()

    assert text_deltas > 1
    assert json_deltas > 2
    thinking, text, first, second = message.content
    assert thinking.type == "thinking" and thinking.thinking == "Plan the two writes." and thinking.signature
    assert text.type == "text" and text.text == TOOL_TURN["text"]
    assert first.type == "tool_use" and second.type == "tool_use"
    assert first.id.startswith("toolu_0_") and second.id.startswith("toolu_1_")
    assert [first.input, second.input] == [call["arguments"] for call in TOOL_TURN["tool_calls"]]
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (7, 9)
    assert message.usage.cache_read_input_tokens == 50


async def test_openai_responses_streams_reasoning_text_and_function_calls(server: ScriptedLLMServer) -> None:
    server.add_scenario(
        "resp", [{**TOOL_TURN, "thinking": "Think first.", "usage": {"input": 30, "cacheRead": 70}}]
    )
    client = openai_client(server, "resp", "openai-responses")
    reasoning = ""
    text_deltas = 0
    async with client.responses.stream(model="m", input="go") as stream:
        async for event in stream:
            if event.type == "response.reasoning_summary_text.delta":
                reasoning += event.delta
            if event.type == "response.output_text.delta":
                text_deltas += 1
        response = await stream.get_final_response()

    assert reasoning == "Think first."
    assert text_deltas > 1
    assert response.output_text == TOOL_TURN["text"]
    calls = [item for item in response.output if item.type == "function_call"]
    assert [call.name for call in calls] == ["write", "edit"]
    assert [json.loads(call.arguments) for call in calls] == [
        call["arguments"] for call in TOOL_TURN["tool_calls"]
    ]
    assert all(
        call.call_id.startswith(f"call_{i}_") and (call.id or "").startswith("fc_")
        for i, call in enumerate(calls)
    )
    assert response.usage is not None
    assert response.usage.input_tokens == 100
    assert response.usage.input_tokens_details.cached_tokens == 70


async def test_max_tokens_ending_on_each_api(server: ScriptedLLMServer) -> None:
    server.add_scenario("cut", [{"text": "cut short", "stop_reason": "length"}])
    chat = await openai_client(server, "cut").chat.completions.create(model="m", messages=USER, stream=True)
    finishes = [chunk.choices[0].finish_reason async for chunk in chat if chunk.choices]
    assert finishes[-1] == "length"

    message = await anthropic_client(server, "cut").messages.create(model="c", max_tokens=5, messages=USER)
    assert message.stop_reason == "max_tokens"

    responses = openai_client(server, "cut", "openai-responses")
    events = [event async for event in await responses.responses.create(model="m", input="go", stream=True)]
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details is not None
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"


async def test_non_streaming_requests_get_a_plain_json_answer(server: ScriptedLLMServer) -> None:
    server.add_scenario("plain", [TOOL_TURN])
    completion = await openai_client(server, "plain").chat.completions.create(model="m", messages=USER)
    assert completion.choices[0].message.content == TOOL_TURN["text"]
    assert completion.choices[0].finish_reason == "tool_calls"
    message = await anthropic_client(server, "plain").messages.create(model="c", max_tokens=5, messages=USER)
    assert [block.type for block in message.content] == ["text", "tool_use", "tool_use"]


# -- turn selection -----------------------------------------------------------------------


async def test_pi_basic_fixture_turn_follows_the_assistant_count(fixtures_dir: Path) -> None:
    recorded = recorded_body(fixtures_dir, "anthropic-messages.json")
    async with ScriptedLLMServer(scenarios_dir=fixtures_dir / "scenarios") as server:
        client = anthropic_client(server, "basic")
        first = await client.messages.create(model="c", max_tokens=100, messages=recorded["messages"][:1])
        last = await client.messages.create(
            model="c",
            max_tokens=100,
            system=recorded["system"],
            tools=recorded["tools"],
            messages=recorded["messages"],
        )
        chat_body = recorded_body(fixtures_dir, "openai-chat-completions.json")
        chat = await openai_client(server, "basic").chat.completions.create(
            model="m", messages=chat_body["messages"][:4]
        )

    assert [block.type for block in first.content] == ["text", "tool_use"]
    assert isinstance(first.content[1], anthropic.types.ToolUseBlock)
    assert first.content[1].input == {"path": "hello.py", "content": "print('hello')\n"}
    assert last.content[0].type == "text" and last.content[0].text == "Done. hello.py now prints hi."
    # system, user, assistant, tool: one assistant message so far -> turn 1 (the bash call)
    bash_call = (chat.choices[0].message.tool_calls or [])[0]
    assert isinstance(bash_call, openai.types.chat.ChatCompletionMessageFunctionToolCall)
    assert json.loads(bash_call.function.arguments) == {"command": "python3 hello.py"}
    assert [request.turn_index for request in server.requests] == [0, 6, 1]


async def test_responses_counts_consecutive_assistant_items_as_one_turn(server: ScriptedLLMServer) -> None:
    server.add_scenario("r", [{"text": "zero"}, {"text": "one"}, {"text": "two"}])
    client = openai_client(server, "r", "openai-responses")
    history: list[Any] = [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    response = await client.responses.create(model="m", input=history)
    assert response.output_text == "one"


async def test_sequential_scenario_serves_turns_in_order_and_summary_does_not_consume_one(
    server: ScriptedLLMServer,
) -> None:
    server.add_scenario("seq", {"select": "sequential", "turns": [{"text": "first"}, {"text": "second"}]})
    client = openai_client(server, "seq")

    async def ask(text: str) -> str:
        reply = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": [{"type": "text", "text": text}]}]
        )
        return reply.choices[0].message.content or ""

    assert await ask("hi") == "first"
    summary = await ask("<conversation>\n[User]: hi\n</conversation>\nSummarize.")
    assert await ask("hi") == "second"
    assert await ask("hi") == "(scripted server: no turn 2 in scenario seq)"
    for heading in (
        "## Goal",
        "## Constraints & Preferences",
        "### Done",
        "### In Progress",
        "## Critical Context",
    ):
        assert heading in summary
    assert [(r.kind, r.turn_index) for r in server.requests] == [
        ("turn", 0),
        ("summary", None),
        ("turn", 1),
        ("turn", 2),
    ]


async def test_pi_compaction_request_gets_the_scenario_summary(
    server: ScriptedLLMServer, fixtures_dir: Path
) -> None:
    recorded = recorded_body(fixtures_dir, "compaction-summary.json")
    server.add_scenario("sum", {"turns": [{"text": "not this"}], "summary": "## Goal\nShip it."})
    stream = await openai_client(server, "sum").chat.completions.create(
        model="m", messages=recorded["messages"], stream=True
    )
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
    assert text == "## Goal\nShip it."
    assert server.requests[0].kind == "summary"


# -- fault injection ----------------------------------------------------------------------


async def test_rate_limit_with_retry_after_then_success(server: ScriptedLLMServer) -> None:
    server.add_scenario("busy", [{"text": "finally", "fail_times": 2, "fail_status": 429, "retry_after": 3}])
    client = openai_client(server, "busy")
    for _ in range(2):
        with pytest.raises(openai.RateLimitError) as raised:
            await client.chat.completions.create(model="m", messages=USER, stream=True)
        assert raised.value.response.headers["retry-after"] == "3"
        assert raised.value.code == "rate_limit_exceeded"
    stream = await client.chat.completions.create(model="m", messages=USER, stream=True)
    assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "finally"
    assert [request.status for request in server.requests_for("busy")] == [429, 429, 200]


async def test_anthropic_overloaded_error_then_success(server: ScriptedLLMServer) -> None:
    server.add_scenario("overloaded", [{"text": "back", "fail_times": 1, "fail_status": 529}])
    client = anthropic_client(server, "overloaded")
    with pytest.raises(anthropic.APIStatusError) as raised:
        await client.messages.create(model="c", max_tokens=5, messages=USER, stream=True)
    assert raised.value.status_code == 529
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["error"]["type"] == "overloaded_error"
    message = await client.messages.create(model="c", max_tokens=5, messages=USER)
    assert message.content[0].type == "text" and message.content[0].text == "back"


async def test_overflow_returns_each_providers_context_error(server: ScriptedLLMServer) -> None:
    server.add_scenario("full", [{"overflow": True}])
    with pytest.raises(openai.BadRequestError) as chat_error:
        await openai_client(server, "full").chat.completions.create(model="m", messages=USER, stream=True)
    assert chat_error.value.code == "context_length_exceeded"
    assert "maximum context length is 128000 tokens" in chat_error.value.message

    responses = openai_client(server, "full", "openai-responses")
    with pytest.raises(openai.BadRequestError) as responses_error:
        await responses.responses.create(model="m", input="go", stream=True)
    assert responses_error.value.code == "context_length_exceeded"
    assert "exceeds the context window" in responses_error.value.message

    with pytest.raises(anthropic.BadRequestError) as claude_error:
        await anthropic_client(server, "full").messages.create(
            model="c", max_tokens=5, messages=USER, stream=True
        )
    assert isinstance(claude_error.value.body, dict)
    assert claude_error.value.body["error"]["type"] == "invalid_request_error"
    assert claude_error.value.body["error"]["message"].startswith("prompt is too long: ")
    assert claude_error.value.body["error"]["message"].endswith(" tokens > 200000 maximum")


async def test_dropped_stream_makes_the_sdks_raise_then_the_retry_succeeds(server: ScriptedLLMServer) -> None:
    server.add_scenario("flaky", [{"text": "complete answer here", "drop_after_chunks": 3, "drop_times": 1}])
    chat = openai_client(server, "flaky")
    received: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        stream = await chat.chat.completions.create(model="m", messages=USER, stream=True)
        async for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
    assert 0 < len(received) <= 3
    stream = await chat.chat.completions.create(model="m", messages=USER, stream=True)
    assert (
        "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        == "complete answer here"
    )

    server.add_scenario(
        "flaky-seq",
        {
            "select": "sequential",
            "turns": [{"text": "first answer", "drop_after_chunks": 2}, {"text": "next"}],
        },
    )
    seq = openai_client(server, "flaky-seq")

    async def ask() -> str:
        stream = await seq.chat.completions.create(model="m", messages=USER, stream=True)
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    with pytest.raises(openai.APIConnectionError):
        await ask()
    assert [await ask(), await ask()] == ["first answer", "next"]

    server.add_scenario("flaky2", [{"text": "again", "drop_after_chunks": 4}])
    # The Anthropic SDK lets the transport error of a broken stream through unwrapped.
    with pytest.raises((anthropic.APIConnectionError, httpx2.TransportError)):
        async with anthropic_client(server, "flaky2").messages.stream(
            model="c", max_tokens=5, messages=USER
        ) as s:
            await s.get_final_message()


async def test_chunk_delays_still_deliver_everything(server: ScriptedLLMServer) -> None:
    server.add_scenario("slow", [{"text": "abcdefgh" * 3, "chunk_delay_ms": 5, "first_chunk_delay_ms": 20}])
    stream = await openai_client(server, "slow").chat.completions.create(
        model="m", messages=USER, stream=True
    )
    assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "abcdefgh" * 3


# -- recording, errors, lifecycle ---------------------------------------------------------


async def test_requests_are_recorded_with_bodies_and_headers(server: ScriptedLLMServer) -> None:
    server.add_scenario("rec", [{"text": "hi"}])
    await anthropic_client(server, "rec").messages.create(model="claude-x", max_tokens=7, messages=USER)
    (recorded,) = server.requests_for("rec")
    assert recorded.api == "anthropic-messages"
    assert recorded.path == "/s/rec/v1/messages"
    assert recorded.body == {"model": "claude-x", "max_tokens": 7, "messages": USER}
    # Older Anthropic SDKs send the key as x-api-key, newer ones as a bearer token.
    assert "test" in (
        recorded.headers.get("x-api-key"),
        recorded.headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert (recorded.turn_index, recorded.kind, recorded.status) == (0, "turn", 200)


async def test_unknown_scenario_is_a_404_naming_the_known_ones(server: ScriptedLLMServer) -> None:
    server.add_scenario("alpha", [])
    with pytest.raises(openai.NotFoundError) as raised:
        await openai_client(server, "beta").chat.completions.create(model="m", messages=USER)
    assert "'beta'" in raised.value.message and "alpha" in raised.value.message
    assert server.requests[0].status == 404


async def test_health_and_malformed_bodies(server: ScriptedLLMServer) -> None:
    server.add_scenario("alpha", [])
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        health = await http.get("/health")
        malformed = await http.post("/s/alpha/v1/messages", content=b"{not json")
        wrong_path = await http.post("/s/alpha/v1/v1/messages", json={})
    assert health.status_code == 200 and health.json()["scenarios"] == ["alpha"]
    assert malformed.status_code == 400
    assert malformed.json()["error"]["type"] == "invalid_request_error"
    assert (
        wrong_path.status_code == 404 and "/s/alpha/v1/v1/messages" in wrong_path.json()["error"]["message"]
    )
    assert [request.status for request in server.requests] == [400]


def test_bad_scenarios_are_refused_with_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="tool_cals"):
        ScriptedLLMServer({"typo": [{"tool_cals": []}]})
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    with pytest.raises(ScenarioError, match=r"broken\.json"):
        ScriptedLLMServer(scenarios_dir=tmp_path)


def test_scenario_object_form_and_defaults() -> None:
    scenario = Scenario.model_validate({"turns": [{"usage": {"cacheWrite": 5}}], "select": "sequential"})
    assert scenario.turns[0].usage.input == 100 and scenario.turns[0].usage.cache_write == 5
    assert ScriptedTurn().chunk_size == 8 and ScriptedTurn().fail_status == 500


def test_thread_mode_serves_synchronous_clients() -> None:
    server = ScriptedLLMServer({"sync": [{"text": "from a thread"}]})
    server.start_in_thread()
    try:
        client = openai.OpenAI(
            base_url=server.url_for("sync", "openai-completions"), api_key="t", max_retries=0
        )
        stream = client.chat.completions.create(model="m", messages=USER, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "from a thread"
    finally:
        server.stop_thread()
    with pytest.raises(RuntimeError):
        _ = server.base_url


def test_cli_serves_scenarios_logs_and_records(tmp_path: Path) -> None:
    scenario_file = tmp_path / "hello.json"
    scenario_file.write_text(json.dumps([{"text": "hello from the cli"}]))
    record = tmp_path / "requests.jsonl"
    process = subprocess.Popen(
        [
            sys.executable,
            *("-m", "tempi.testing.scripted_llm", "--port", "0"),
            *("--scenarios", str(scenario_file), "--record", str(record)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first_line: list[str] = []
        reader = threading.Thread(
            target=lambda: first_line.append(process.stdout.readline() if process.stdout else "")
        )
        reader.start()
        reader.join(timeout=30)
        assert first_line and first_line[0].startswith("scripted LLM server at http://127.0.0.1:")
        base_url = first_line[0].split()[-1]
        client = anthropic.Anthropic(base_url=f"{base_url}/s/hello", api_key="t", max_retries=0)
        message = client.messages.create(model="c", max_tokens=5, messages=USER)
        assert message.content[0].type == "text" and message.content[0].text == "hello from the cli"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert process.returncode == 0
    assert "anthropic-messages hello [turn 0] /s/hello/v1/messages -> 200" in stderr
    lines = record.read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["body"]["model"] == "c"


def test_cli_help_explains_the_scenario_format(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli_main(["--help"])
    out = capsys.readouterr().out
    assert "tool_calls" in out and "assistant_count" in out and "fail_times" in out


def test_cli_rejects_a_missing_scenario_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli_main(["--scenarios", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
