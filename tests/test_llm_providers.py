"""The three real providers, through the official SDKs, against the scripted LLM server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tempi.activities.llm import StreamOptions, classify_error, complete, retry_after_ms, stream_assistant
from tempi.agent.llm_context import LlmContext
from tempi.agent.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tempi.agent.model_spec import ModelCost, ModelSpec
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.dev_server import free_port
from tests.provider_streams import (
    CONTEXT,
    LONG_TEXT,
    OPTIONS,
    SCRIPTED_CALLS,
    STREAM_SCENARIOS,
    TOOLS,
    aborted_after_three_deltas,
    collect,
    final_message,
    ok_results,
    per_api,
    scenario,
)

APIS = ["anthropic-messages", "openai-completions", "openai-responses"]
PRICES = ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75)
SCENARIOS: dict[str, list[dict[str, Any]]] = {
    **STREAM_SCENARIOS,
    # Three failures: the SDK's own two retries (as pi-ai's) do not hide them.
    "rate-limited": [{"text": "after the wait", "fail_times": 3, "fail_status": 429, "retry_after": 1}],
    "unavailable": [{"text": "back again", "fail_times": 3, "fail_status": 503}],
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def server() -> AsyncIterator[ScriptedLLMServer]:
    async with ScriptedLLMServer(scenarios=per_api(SCENARIOS, APIS)) as running:
        yield running


def model_for(server: ScriptedLLMServer, name: str, api: str, **updates: Any) -> ModelSpec:
    spec = ModelSpec(
        id="mock-model",
        api=api,
        provider="mock",
        base_url=server.url_for(scenario(name, api), api),
        reasoning=True,
        cost=PRICES,
        max_tokens=16384,
    )
    return spec.model_copy(update=updates)


@pytest.mark.parametrize("api", APIS)
async def test_text_streams_in_deltas_with_usage_and_cost(server: ScriptedLLMServer, api: str) -> None:
    events = await collect(model_for(server, "text", api))
    kinds = [event.type for event in events]
    assert kinds[:2] == ["start", "text_start"] and kinds[-2:] == ["text_end", "done"]
    assert kinds.count("text_delta") > 3
    message = final_message(events)
    assert message.stop_reason == "stop"
    assert message.text() == "The quick brown fox jumps over the lazy dog."
    assert message.response_id
    usage = message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (1200, 300, 100, 40)
    assert usage.total_tokens == 1640
    expected = (1200 * 3 + 300 * 15 + 100 * 0.3 + 40 * 3.75) / 1_000_000
    assert usage.cost.total == pytest.approx(expected)


@pytest.mark.parametrize("api", APIS)
async def test_thinking_streams_before_the_answer(server: ScriptedLLMServer, api: str) -> None:
    model = model_for(server, "thinking", api, max_tokens=64_000)
    events = await collect(model, options=OPTIONS.model_copy(update={"thinking_level": "high"}))
    message = final_message(events)
    thinking, text = message.content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == "Weighing both options carefully."
    assert isinstance(text, TextContent) and text.text == "Option B."
    assert [e.type for e in events].count("thinking_delta") >= 2
    body = server.requests_for(scenario("thinking", api))[-1].body
    if api == "anthropic-messages":
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 16384, "display": "summarized"}
        assert body["max_tokens"] == 32_000 + 16384
    elif api == "openai-completions":
        assert body["reasoning_effort"] == "high"
    else:
        assert body["reasoning"] == {"effort": "high", "summary": "auto"}


@pytest.mark.parametrize("api", APIS)
async def test_parallel_tool_calls_and_their_results_round_trip(server: ScriptedLLMServer, api: str) -> None:
    model = model_for(server, "tools", api)
    events = await collect(model, options=OPTIONS.model_copy(update={"thinking_level": "low"}))
    first = final_message(events)
    assert first.stop_reason == "toolUse"
    calls = first.tool_calls()
    assert [(c.name, c.arguments) for c in calls] == SCRIPTED_CALLS
    assert len({c.id for c in calls}) == 2
    # Arguments arrive in several pieces, and the partial view grows with them.
    assert [e.type for e in events].count("toolcall_delta") >= 4

    follow_up = CONTEXT.model_copy(update={"messages": [*CONTEXT.messages, first, *ok_results(calls)]})
    second = await complete(model, follow_up, OPTIONS.model_copy(update={"thinking_level": "low"}))
    assert (second.stop_reason, second.text()) == ("stop", "Both checked.")

    body = server.requests_for(scenario("tools", api))[-1].body
    sent_ids = _replayed_call_ids(api, body)
    assert sent_ids["calls"] == sent_ids["results"] and len(sent_ids["calls"]) == 2
    assert _thinking_was_replayed(api, body)


def _replayed_call_ids(api: str, body: dict[str, Any]) -> dict[str, list[str]]:
    if api == "anthropic-messages":
        assistant = next(m for m in body["messages"] if m["role"] == "assistant")
        results = body["messages"][-1]["content"]
        return {
            "calls": [b["id"] for b in assistant["content"] if b["type"] == "tool_use"],
            "results": [b["tool_use_id"] for b in results if b["type"] == "tool_result"],
        }
    if api == "openai-completions":
        assistant = next(m for m in body["messages"] if m["role"] == "assistant")
        return {
            "calls": [c["id"] for c in assistant["tool_calls"]],
            "results": [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"],
        }
    return {
        "calls": [i["call_id"] for i in body["input"] if i.get("type") == "function_call"],
        "results": [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"],
    }


def _thinking_was_replayed(api: str, body: dict[str, Any]) -> bool:
    if api == "anthropic-messages":
        assistant = next(m for m in body["messages"] if m["role"] == "assistant")
        return any(b["type"] == "thinking" and b["signature"] for b in assistant["content"])
    if api == "openai-completions":
        assistant = next(m for m in body["messages"] if m["role"] == "assistant")
        return assistant.get("reasoning_content") == "I need the file and the listing."
    return any(i.get("type") == "reasoning" for i in body["input"])


@pytest.mark.parametrize("api", APIS)
async def test_max_tokens_stop_is_length(server: ScriptedLLMServer, api: str) -> None:
    message = final_message(await collect(model_for(server, "length", api)))
    assert (message.stop_reason, message.text()) == ("length", "cut short")


@pytest.mark.parametrize("api", APIS)
async def test_rate_limit_is_retryable_with_the_requested_wait(server: ScriptedLLMServer, api: str) -> None:
    model = model_for(server, "rate-limited", api)
    failed = await complete(model, CONTEXT, OPTIONS)
    assert failed.stop_reason == "error"
    assert (failed.error_message or "").startswith("429 ")
    assert classify_error(failed) == "retryable"
    assert retry_after_ms(failed) == 1000
    # The SDK retried twice on its own, waiting as asked, as pi-ai's SDKs do.
    assert len(server.requests_for(scenario("rate-limited", api))) == 3

    retried = await complete(model, CONTEXT, OPTIONS)
    assert (retried.stop_reason, retried.text()) == ("stop", "after the wait")


@pytest.mark.parametrize("api", APIS)
async def test_server_errors_are_retryable(server: ScriptedLLMServer, api: str) -> None:
    failed = await complete(model_for(server, "unavailable", api), CONTEXT, OPTIONS)
    assert (failed.error_message or "").startswith("503 ")
    assert classify_error(failed) == "retryable"
    assert retry_after_ms(failed) is None


@pytest.mark.parametrize("api", APIS)
async def test_context_overflow_is_classified_as_overflow(server: ScriptedLLMServer, api: str) -> None:
    failed = await complete(model_for(server, "overflow", api), CONTEXT, OPTIONS)
    assert failed.stop_reason == "error"
    assert classify_error(failed) == "overflow"


@pytest.mark.parametrize("api", APIS)
async def test_abort_mid_stream_keeps_the_partial_text(server: ScriptedLLMServer, api: str) -> None:
    last = await aborted_after_three_deltas(model_for(server, "slow", api))
    assert last.error.stop_reason == "aborted"
    assert LONG_TEXT.startswith(last.error.text())
    assert 0 < len(last.error.text()) < len(LONG_TEXT)


@pytest.mark.parametrize("api", APIS)
async def test_a_dropped_connection_is_retryable(server: ScriptedLLMServer, api: str) -> None:
    failed = await complete(model_for(server, "dropped", api), CONTEXT, OPTIONS)
    assert failed.stop_reason == "error"
    assert classify_error(failed) == "retryable", failed.error_message


@pytest.mark.parametrize("api", APIS)
async def test_missing_api_key_fails_before_any_request(server: ScriptedLLMServer, api: str) -> None:
    failed = await complete(model_for(server, "text", api, id="keyless"), CONTEXT, StreamOptions())
    assert failed.stop_reason == "error"
    assert "No API key for provider 'mock'" in (failed.error_message or "")
    assert classify_error(failed) == "fatal"
    assert not [r for r in server.requests_for(scenario("text", api)) if r.body.get("model") == "keyless"]


@pytest.mark.parametrize("api", APIS)
async def test_an_unreachable_server_is_a_retryable_connection_error(api: str) -> None:
    base = f"http://127.0.0.1:{free_port()}" + ("" if api == "anthropic-messages" else "/v1")
    model = ModelSpec(id="m", api=api, provider="mock", base_url=base)
    failed = await complete(model, CONTEXT, OPTIONS)
    assert (failed.error_message or "").startswith("Connection error")
    assert classify_error(failed) == "retryable"


@pytest.mark.parametrize("api", APIS)
async def test_headers_and_key_reach_the_provider(server: ScriptedLLMServer, api: str) -> None:
    model = model_for(server, "length", api, headers={"x-model-header": "m", "x-both": "model"})
    options = OPTIONS.model_copy(update={"headers": {"x-both": "call"}})
    await complete(model, CONTEXT, options)
    headers = server.requests_for(scenario("length", api))[-1].headers
    assert headers["x-model-header"] == "m"
    assert headers["x-both"] == "call"
    # As pi: an Anthropic API key as x-api-key, an OpenAI one as a bearer token.
    if api == "anthropic-messages":
        assert headers["x-api-key"] == "test-key" and "authorization" not in headers
    else:
        assert headers["authorization"] == "Bearer test-key"


@pytest.mark.parametrize("api", APIS)
async def test_a_changed_key_or_header_reaches_the_next_request(server: ScriptedLLMServer, api: str) -> None:
    """A rotated key or changed header is what the very next request carries, and going back
    to the first settings works too (nothing pins a provider client's first settings)."""
    model = model_for(server, "length", api)
    calls = [("key-one", "a"), ("key-two", "a"), ("key-two", "b"), ("key-one", "a")]
    for key, header in calls:
        await complete(
            model, CONTEXT, OPTIONS.model_copy(update={"api_key": key, "headers": {"x-call": header}})
        )
    sent = server.requests_for(scenario("length", api))[-len(calls) :]
    keys = [r.headers.get("x-api-key") or r.headers.get("authorization") or "" for r in sent]
    assert [k.removeprefix("Bearer ") for k in keys] == [key for key, _ in calls]
    assert [r.headers.get("x-call") for r in sent] == [header for _, header in calls]


@pytest.mark.parametrize("api", APIS)
async def test_cancelling_the_consumer_propagates(server: ScriptedLLMServer, api: str) -> None:
    streaming = asyncio.Event()

    async def consume() -> None:
        async for event in stream_assistant(model_for(server, "slow", api), CONTEXT, OPTIONS):
            if event.type == "text_delta":
                streaming.set()

    task = asyncio.create_task(consume())
    await streaming.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("api", APIS)
async def test_github_copilot_gets_its_per_request_headers_and_a_bearer_token(
    server: ScriptedLLMServer, api: str
) -> None:
    model = model_for(server, "text", api, provider="github-copilot")
    before = len(server.requests_for(scenario("text", api)))
    picture = ImageContent(data="iVBORw0KGgo=", mime_type="image/png")
    after_a_tool = LlmContext(
        messages=[
            UserMessage(content=[TextContent(text="Look."), picture], timestamp=1),
            AssistantMessage(
                content=[ToolCall(id="c1", name="read", arguments={"path": "a"})],
                api=api,
                provider="github-copilot",
                model="mock-model",
                stop_reason="toolUse",
                timestamp=2,
            ),
            ToolResultMessage(
                tool_call_id="c1", tool_name="read", content=[TextContent(text="a")], timestamp=3
            ),
        ],
        tools=TOOLS,
    )
    assert final_message(await collect(model)).stop_reason == "stop"
    assert final_message(await collect(model, after_a_tool)).stop_reason == "stop"

    first, second = (r.headers for r in server.requests_for(scenario("text", api))[before:])
    assert (first["x-initiator"], first["openai-intent"]) == ("user", "conversation-edits")
    assert "copilot-vision-request" not in first
    assert (second["x-initiator"], second["copilot-vision-request"]) == ("agent", "true")
    # Copilot's token travels as Bearer on every API, Anthropic's included.
    assert first["authorization"] == "Bearer test-key" and "x-api-key" not in first


@pytest.mark.parametrize("api", APIS)
async def test_cloudflare_ai_gateway_fills_its_url_from_the_environment_and_sends_its_own_auth(
    server: ScriptedLLMServer, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scripted server's path stands in for the account and gateway of the real URL.
    templated = server.url_for(scenario("text", api), api).replace(scenario("text", api), "{CF_TEST_GATEWAY}")
    model = model_for(server, "text", api, provider="cloudflare-ai-gateway", base_url=templated)
    monkeypatch.delenv("CF_TEST_GATEWAY", raising=False)
    missing = final_message(await collect(model))
    assert missing.stop_reason == "error"
    assert "CF_TEST_GATEWAY is required for provider cloudflare-ai-gateway" in (missing.error_message or "")

    monkeypatch.setenv("CF_TEST_GATEWAY", scenario("text", api))
    before = len(server.requests_for(scenario("text", api)))
    assert final_message(await collect(model)).stop_reason == "stop"
    (sent,) = server.requests_for(scenario("text", api))[before:]
    assert sent.headers["cf-aig-authorization"] == "Bearer test-key"
    assert "authorization" not in sent.headers and "x-api-key" not in sent.headers
