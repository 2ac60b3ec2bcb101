"""Amazon Bedrock (`bedrock-converse-stream`) through tempi's provider, over real HTTP, against
the scripted server's AWS event-stream endpoint, which checks every SigV4 signature made
with the scripted key pair."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from tempi.activities.llm import StreamOptions, classify_error, complete
from tempi.activities.llm.bedrock_access import resolve_target
from tempi.agent.messages import (
    AssistantMessage,
    LlmMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tempi.agent.model_spec import ModelCost, ModelSpec
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.scripted_llm.bedrock_auth import (
    REVOKED_AWS_ACCESS_KEY_ID,
    SCRIPTED_AWS_ACCESS_KEY_ID,
    SCRIPTED_AWS_SECRET_ACCESS_KEY,
    parse_sigv4,
)
from tempi.workers.dev_server import free_port
from tests.provider_streams import (
    CONTEXT,
    LONG_TEXT,
    SCRIPTED_CALLS,
    STREAM_SCENARIOS,
    aborted_after_three_deltas,
    collect,
    final_message,
    ok_results,
)

API = "bedrock-converse-stream"
CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
PRICES = ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75)
SCENARIOS: dict[str, list[dict[str, Any]]] = {
    **STREAM_SCENARIOS,
    "throttled": [{"text": "after the wait", "fail_times": 3, "fail_status": 429}],
    "unavailable": [{"text": "back again", "fail_times": 1, "fail_status": 503}],
    "denied": [{"text": "never", "fail_times": 5, "fail_status": 403}],
    "stream-error": [{"text": "half an answer", "stream_exception": "modelStreamErrorException"}],
    "stream-throttled": [{"text": "", "stream_exception": "throttlingException"}],
    "malformed": [{"text": "never", "fail_times": 5, "fail_status": 400}],
    # Its request already holds one assistant turn (from Anthropic).
    "cross": [{"text": "unused"}, {"text": "continued"}],
}
# What tempi's key resolution passes for Bedrock: nothing, or pi's marker.
OPTIONS = StreamOptions(api_key="<authenticated>")


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Only the variables a test sets; no instance-metadata probe from this machine."""
    for name in list(os.environ):
        if name.startswith("AWS_") or name.endswith(("_PROXY", "_proxy")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", SCRIPTED_AWS_ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SCRIPTED_AWS_SECRET_ACCESS_KEY)
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    yield


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def server() -> AsyncIterator[ScriptedLLMServer]:
    async with ScriptedLLMServer(scenarios=SCENARIOS) as running:
        yield running


def model_for(server: ScriptedLLMServer, scenario: str, **updates: Any) -> ModelSpec:
    spec = ModelSpec(
        id=CLAUDE,
        name="Claude Sonnet 4.5 (US)",
        api=API,
        provider="amazon-bedrock",
        base_url=server.url_for(scenario, API),
        reasoning=True,
        input=["text", "image"],
        cost=PRICES,
        max_tokens=64_000,
    )
    return spec.model_copy(update=updates)


def last_request(server: ScriptedLLMServer, scenario: str) -> Any:
    return server.requests_for(scenario)[-1]


async def test_text_streams_with_usage_and_a_verified_signature(server: ScriptedLLMServer) -> None:
    events = await collect(model_for(server, "text"), options=OPTIONS)
    kinds = [event.type for event in events]
    assert kinds[:2] == ["start", "text_start"] and kinds[-2:] == ["text_end", "done"]
    assert kinds.count("text_delta") > 3
    message = final_message(events)
    assert (message.stop_reason, message.text()) == ("stop", "The quick brown fox jumps over the lazy dog.")
    usage = message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (1200, 300, 100, 40)
    assert usage.cost.total == pytest.approx((1200 * 3 + 300 * 15 + 100 * 0.3 + 40 * 3.75) / 1_000_000)

    request = last_request(server, "text")
    # The server checked the signature with botocore (status 200); the scope is AWS_REGION's.
    assert request.status == 200
    assert request.raw_path == "/s/text/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    signature = parse_sigv4(request.headers["authorization"])
    assert signature is not None
    assert (signature.access_key, signature.region, signature.service) == (
        SCRIPTED_AWS_ACCESS_KEY_ID,
        "us-west-2",
        "bedrock",
    )


async def test_two_turns_of_tool_calls_replay_reasoning_and_group_results(server: ScriptedLLMServer) -> None:
    model = model_for(server, "tools")
    options = OPTIONS.model_copy(update={"thinking_level": "low"})
    events = await collect(model, options=options)
    first = final_message(events)
    assert first.stop_reason == "toolUse"
    thinking = first.content[0]
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == "I need the file and the listing."
    assert thinking.thinking_signature
    calls = first.tool_calls()
    assert [(c.name, c.arguments) for c in calls] == SCRIPTED_CALLS
    assert [e.type for e in events].count("toolcall_delta") >= 4

    follow_up = CONTEXT.model_copy(update={"messages": [*CONTEXT.messages, first, *ok_results(calls)]})
    second = await complete(model, follow_up, options)
    assert (second.stop_reason, second.text()) == ("stop", "Both checked.")

    body = last_request(server, "tools").body
    assistant = body["messages"][1]
    assert assistant["content"][0] == {
        "reasoningContent": {
            "reasoningText": {
                "text": "I need the file and the listing.",
                "signature": thinking.thinking_signature,
            }
        }
    }
    assert [b["toolUse"]["toolUseId"] for b in assistant["content"][2:]] == [c.id for c in calls]
    # Both results in one user message, then the cache point, as pi sends them.
    results_message = body["messages"][2]
    assert [b["toolResult"]["toolUseId"] for b in results_message["content"][:2]] == [c.id for c in calls]
    assert results_message["content"][0]["toolResult"]["content"] == [{"text": "read ok"}]
    assert results_message["content"][2] == {"cachePoint": {"type": "default"}}
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 2048, "display": "summarized"},
        "anthropic_beta": ["interleaved-thinking-2025-05-14"],
    }
    assert body["inferenceConfig"] == {"maxTokens": 32_000 + 2048}


async def test_max_tokens_stop_is_length(server: ScriptedLLMServer) -> None:
    message = final_message(await collect(model_for(server, "length"), options=OPTIONS))
    assert (message.stop_reason, message.text()) == ("length", "cut short")


async def test_throttling_is_retried_quietly_then_retryable(server: ScriptedLLMServer) -> None:
    failed = await complete(model_for(server, "throttled"), CONTEXT, OPTIONS)
    assert (failed.error_message or "").startswith("429 Throttling error: Too many requests")
    assert classify_error(failed) == "retryable"
    # The first request and the AWS SDK's two quiet retries, as pi's SDK makes them.
    assert len(server.requests_for("throttled")) == 3
    retried = await complete(model_for(server, "throttled"), CONTEXT, OPTIONS)
    assert (retried.stop_reason, retried.text()) == ("stop", "after the wait")


async def test_a_service_unavailable_answer_is_retried_quietly(server: ScriptedLLMServer) -> None:
    message = await complete(model_for(server, "unavailable"), CONTEXT, OPTIONS)
    assert (message.stop_reason, message.text()) == ("stop", "back again")
    assert [r.status for r in server.requests_for("unavailable")] == [503, 200]
    no_retries = OPTIONS.model_copy(update={"sdk_retries": 0})
    server.add_scenario("unavailable-once", SCENARIOS["unavailable"])
    failed = await complete(model_for(server, "unavailable-once"), CONTEXT, no_retries)
    assert (failed.error_message or "").startswith("503 Service unavailable:")
    assert classify_error(failed) == "retryable"


async def test_stream_exceptions_keep_the_partial_answer_and_are_retryable(server: ScriptedLLMServer) -> None:
    failed = await complete(model_for(server, "stream-error"), CONTEXT, OPTIONS)
    assert failed.stop_reason == "error" and failed.text() == "half an answer"
    assert (failed.error_message or "").startswith("Model stream error: ")
    assert classify_error(failed) == "retryable"
    throttled = await complete(model_for(server, "stream-throttled"), CONTEXT, OPTIONS)
    assert (throttled.error_message or "").startswith("Throttling error: ")
    assert classify_error(throttled) == "retryable"


async def test_context_overflow_is_classified_as_overflow(server: ScriptedLLMServer) -> None:
    failed = await complete(model_for(server, "overflow"), CONTEXT, OPTIONS)
    assert (failed.error_message or "").startswith("400 Validation error: Input is too long")
    assert classify_error(failed) == "overflow"


async def test_access_denied_is_final_and_says_what_to_set(server: ScriptedLLMServer) -> None:
    failed = await complete(model_for(server, "denied"), CONTEXT, OPTIONS)
    message = failed.error_message or ""
    assert message.startswith("403 AccessDeniedException: You don't have access")
    for hint in (
        "Amazon Bedrock",
        "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_REGION",
    ):
        assert hint in message
    assert classify_error(failed) == "fatal"
    assert len(server.requests_for("denied")) == 1  # not retried


async def test_a_malformed_request_is_final_and_names_the_region(server: ScriptedLLMServer) -> None:
    failed = await complete(model_for(server, "malformed"), CONTEXT, OPTIONS)
    message = failed.error_message or ""
    # Bedrock's own text ends "please reformat your input and try again": still final.
    assert message.startswith("400 Validation error: Malformed input request")
    assert "Amazon Bedrock in us-west-2" in message and "AWS_REGION" in message
    assert classify_error(failed) == "fatal"
    assert len(server.requests_for("malformed")) == 1


async def test_an_unknown_key_is_final(server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", REVOKED_AWS_ACCESS_KEY_ID)
    failed = await complete(model_for(server, "text"), CONTEXT, OPTIONS)
    assert (failed.error_message or "").startswith("403 UnrecognizedClientException: The security token")
    assert "AWS_PROFILE" in (failed.error_message or "")
    assert classify_error(failed) == "fatal"


async def test_a_wrong_secret_fails_the_signature_check(
    server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    failed = await complete(model_for(server, "text"), CONTEXT, OPTIONS)
    assert (failed.error_message or "").startswith("403 InvalidSignatureException")
    assert classify_error(failed) == "fatal"


async def test_a_bearer_token_is_sent_instead_of_a_signature(
    server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-123")
    message = await complete(model_for(server, "length"), CONTEXT, StreamOptions())
    assert message.text() == "cut short"
    assert last_request(server, "length").headers["authorization"] == "Bearer bedrock-api-key-123"

    # AWS_BEDROCK_SKIP_AUTH=1 wins: dummy keys, for proxies that need no auth.
    monkeypatch.setenv("AWS_BEDROCK_SKIP_AUTH", "1")
    await complete(model_for(server, "length"), CONTEXT, OPTIONS)
    signature = parse_sigv4(last_request(server, "length").headers["authorization"])
    assert signature is not None and signature.access_key == "dummy-access-key"


async def test_a_profile_gives_keys_and_region(
    server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("AWS_REGION")
    # With a profile named, keys in the environment are not used (as in pi's AWS SDK).
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", REVOKED_AWS_ACCESS_KEY_ID)
    aws = Path(os.environ["HOME"]) / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text(
        f"[work]\naws_access_key_id = {SCRIPTED_AWS_ACCESS_KEY_ID}\n"
        f"aws_secret_access_key = {SCRIPTED_AWS_SECRET_ACCESS_KEY}\n"
    )
    (aws / "config").write_text("[profile work]\nregion = eu-central-1\n")
    monkeypatch.setenv("AWS_PROFILE", "work")
    message = await complete(model_for(server, "length"), CONTEXT, OPTIONS)
    assert message.text() == "cut short", message.error_message
    request = last_request(server, "length")
    signature = parse_sigv4(request.headers["authorization"])
    assert signature is not None and request.status == 200
    assert (signature.access_key, signature.region) == (SCRIPTED_AWS_ACCESS_KEY_ID, "eu-central-1")


async def test_container_credentials_sign_with_their_session_token(
    server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default chain's container provider (ECS/EKS), served here from a local endpoint."""
    fetched: list[str] = []

    async def credentials(request: web.Request) -> web.Response:
        fetched.append(request.headers.get("Authorization", ""))
        return web.json_response(
            {
                "AccessKeyId": SCRIPTED_AWS_ACCESS_KEY_ID,
                "SecretAccessKey": SCRIPTED_AWS_SECRET_ACCESS_KEY,
                "Token": "container-session-token",
                "Expiration": "2099-01-01T00:00:00Z",
            }
        )

    app = web.Application()
    app.router.add_get("/creds", credentials)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            monkeypatch.delenv(name)
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"http://127.0.0.1:{port}/creds")
        monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "pod-token")
        for _ in range(2):
            message = await complete(model_for(server, "length"), CONTEXT, OPTIONS)
            assert message.text() == "cut short", message.error_message
    finally:
        await runner.cleanup()
    request = last_request(server, "length")
    assert request.headers["x-amz-security-token"] == "container-session-token"
    # Fetched once and kept until they near expiry, not once per model call.
    assert fetched == ["pod-token"]


async def test_no_credentials_fail_before_any_request_naming_what_to_set(
    server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    before = len(server.requests_for("text"))
    failed = await complete(model_for(server, "text"), CONTEXT, StreamOptions())
    message = failed.error_message or ""
    assert message.startswith("No AWS credentials for Amazon Bedrock")
    for hint in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_BEARER_TOKEN_BEDROCK"):
        assert hint in message
    assert classify_error(failed) == "fatal"
    assert len(server.requests_for("text")) == before


def test_region_and_endpoint_follow_pis_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = ModelSpec(
        id="anthropic.claude-opus-4-7",
        api=API,
        provider="amazon-bedrock",
        base_url="https://bedrock-runtime.us-east-1.amazonaws.com",
    )
    # A configured region wins over the catalog's standard URL, endpoint included.
    target = resolve_target(catalog)
    assert (target.region, target.url) == (
        "us-west-2",
        "https://bedrock-runtime.us-west-2.amazonaws.com/model/anthropic.claude-opus-4-7/converse-stream",
    )
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert resolve_target(catalog).region == "ap-south-1"
    # Nothing configured: the standard URL's own region and endpoint.
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    eu = catalog.model_copy(update={"base_url": "https://bedrock-runtime.eu-central-1.amazonaws.com"})
    target = resolve_target(eu)
    assert (target.region, target.url.split("/model/")[0]) == ("eu-central-1", eu.base_url)
    # A custom endpoint (VPC, proxy) is always used; the region falls back to us-east-1.
    proxy = catalog.model_copy(
        update={"base_url": "https://bedrock.internal.example/v1/", "id": "arn:aws:x/y"}
    )
    target = resolve_target(proxy)
    assert (target.region, target.url) == (
        "us-east-1",
        "https://bedrock.internal.example/v1/model/arn%3Aaws%3Ax%2Fy/converse-stream",
    )
    monkeypatch.setenv("AWS_REGION", "cn-north-1")
    assert resolve_target(catalog).url.startswith("https://bedrock-runtime.cn-north-1.amazonaws.com.cn/")


async def test_abort_mid_stream_keeps_the_partial_text(server: ScriptedLLMServer) -> None:
    last = await aborted_after_three_deltas(model_for(server, "slow"), OPTIONS)
    assert LONG_TEXT.startswith(last.error.text()) and 0 < len(last.error.text()) < len(LONG_TEXT)


async def test_a_dropped_connection_is_retryable(server: ScriptedLLMServer) -> None:
    failed = await complete(model_for(server, "dropped"), CONTEXT, OPTIONS)
    assert failed.stop_reason == "error"
    assert classify_error(failed) == "retryable", failed.error_message


async def test_an_unreachable_endpoint_is_a_retryable_connection_error() -> None:
    model = ModelSpec(id="m", api=API, provider="amazon-bedrock", base_url=f"http://127.0.0.1:{free_port()}")
    failed = await complete(model, CONTEXT, OPTIONS.model_copy(update={"sdk_retries": 0}))
    assert (failed.error_message or "").startswith("Connection error")
    assert classify_error(failed) == "retryable"


async def test_anthropic_turns_continue_on_bedrock(server: ScriptedLLMServer) -> None:
    """pi's cross-provider hand-off: another API's thinking becomes text, tool-call ids are
    made acceptable, and each result follows its call."""
    earlier = AssistantMessage(
        content=[
            ThinkingContent(thinking="Plan: read it.", thinking_signature="anthropic-sig"),
            ThinkingContent(thinking="[redacted]", thinking_signature="opaque", redacted=True),
            TextContent(text="Reading."),
            ToolCall(id="toolu_01A", name="read", arguments={"path": "a"}),
            ToolCall(id="call_9|fc_9+x", name="bash", arguments={"command": "ls"}),
        ],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        stop_reason="toolUse",
        timestamp=2,
    )
    messages: list[LlmMessage] = [
        UserMessage(content="go", timestamp=1),
        earlier,
        ToolResultMessage(
            tool_call_id="toolu_01A", tool_name="read", content=[TextContent(text="A")], timestamp=3
        ),
        ToolResultMessage(
            tool_call_id="call_9|fc_9+x",
            tool_name="bash",
            content=[TextContent(text="B")],
            is_error=True,
            timestamp=3,
        ),
    ]
    message = await complete(
        model_for(server, "cross"), CONTEXT.model_copy(update={"messages": messages}), OPTIONS
    )
    assert message.text() == "continued", message.error_message
    body = last_request(server, "cross").body
    assert body["messages"][1]["content"] == [
        {"text": "Plan: read it."},
        {"text": "Reading."},
        {"toolUse": {"toolUseId": "toolu_01A", "name": "read", "input": {"path": "a"}}},
        {"toolUse": {"toolUseId": "call_9", "name": "bash", "input": {"command": "ls"}}},
    ]
    assert body["messages"][2]["content"][:2] == [
        {"toolResult": {"toolUseId": "toolu_01A", "content": [{"text": "A"}], "status": "success"}},
        {"toolResult": {"toolUseId": "call_9", "content": [{"text": "B"}], "status": "error"}},
    ]
    assert json.dumps(body).count("cachePoint") == 2  # after the system prompt and the last message
