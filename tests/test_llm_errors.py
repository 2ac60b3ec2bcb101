"""How failures are worded, classified for retry, and priced."""

from __future__ import annotations

import anthropic
import httpx2
import openai
import pytest

from tempi.activities.llm import classify_error, retry_after_ms
from tempi.activities.llm.cost import priced_usage
from tempi.activities.llm.errors import describe_exception, format_retry_after, retry_after_seconds
from tempi.agent.messages import AssistantMessage, StopReason
from tempi.agent.model_spec import ModelCost


def failed(text: str | None, stop_reason: StopReason = "error") -> AssistantMessage:
    return AssistantMessage(
        api="x", provider="p", model="m", stop_reason=stop_reason, error_message=text, timestamp=1
    )


@pytest.mark.parametrize(
    "text",
    [
        "429 rate_limit_exceeded: Rate limit reached for tokens per min (TPM)",
        "500 server_error: The server had an error",
        "503 The engine is currently overloaded",
        "529 overloaded_error: Overloaded",
        "overloaded_error: Overloaded",
        "Connection error: RemoteProtocolError: peer closed connection",
        "Connection error: the request timed out",
        "The response stream ended before the provider finished the message",
    ],
)
def test_transient_failures_are_retryable(text: str) -> None:
    assert classify_error(failed(text)) == "retryable"


@pytest.mark.parametrize(
    "text",
    [
        "400 context_length_exceeded: This model's maximum context length is 128000 tokens.",
        "400 invalid_request_error: prompt is too long: 200001 tokens > 200000 maximum",
        "400 Your input exceeds the context window of this model.",
        "400 too many tokens in the request",
        "400 Input is too long for requested model.",
    ],
)
def test_context_overflow_wordings_are_recognised(text: str) -> None:
    assert classify_error(failed(text)) == "overflow"


@pytest.mark.parametrize(
    "text",
    [
        "401 authentication_error: invalid x-api-key",
        "No API key for provider 'x'",
        "400 Invalid request.",
        None,
    ],
)
def test_other_failures_are_fatal(text: str | None) -> None:
    assert classify_error(failed(text)) == "fatal"


def test_messages_that_did_not_fail_have_no_class() -> None:
    assert classify_error(failed(None, stop_reason="stop")) is None
    assert classify_error(failed("Request aborted", stop_reason="aborted")) is None


@pytest.mark.parametrize(("seconds", "millis"), [(2, 2000), (1.5, 1500), (0.25, 250), (30, 30000)])
def test_retry_after_survives_the_round_trip_through_the_message(seconds: float, millis: int) -> None:
    assert retry_after_ms(failed("429 slow down" + format_retry_after(seconds))) == millis


def test_no_retry_after_when_the_provider_gave_none() -> None:
    assert retry_after_ms(failed("429 slow down")) is None


def test_retry_after_headers_prefer_milliseconds_and_accept_dates() -> None:
    assert retry_after_seconds({"Retry-After-Ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after": "7"}) == 7
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_an_sdk_status_error_is_described_with_status_code_message_and_wait() -> None:
    request = httpx2.Request("POST", "https://api.example/v1/chat/completions")
    response = httpx2.Response(429, headers={"retry-after": "3"}, request=request)
    body = {"message": "Slow down", "type": "requests", "code": "rate_limit_exceeded"}
    text = describe_exception(openai.RateLimitError("Error code: 429", response=response, body=body))
    assert text == "429 rate_limit_exceeded: Slow down (retry after 3s)"
    assert classify_error(failed(text)) == "retryable"
    assert retry_after_ms(failed(text)) == 3000


def test_an_anthropic_error_event_inside_a_healthy_stream_is_described_without_status() -> None:
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    response = httpx2.Response(200, request=request)
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    text = describe_exception(anthropic.APIStatusError("stream error", response=response, body=body))
    assert text == "overloaded_error: Overloaded"
    assert classify_error(failed(text)) == "retryable"


def test_a_connection_failure_names_its_cause() -> None:
    request = httpx2.Request("POST", "https://api.example/v1")
    try:
        try:
            raise httpx2.ConnectError("connection refused")
        except httpx2.ConnectError as cause:
            raise openai.APIConnectionError(request=request) from cause
    except openai.APIConnectionError as exc:
        text = describe_exception(exc)
    assert text == "Connection error: ConnectError: connection refused"
    assert classify_error(failed(text)) == "retryable"


def test_cost_uses_dollars_per_million_tokens() -> None:
    rates = ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75)
    usage = priced_usage(rates, input=1_000_000, output=200_000, cache_read=500_000, cache_write=100_000)
    assert usage.total_tokens == 1_800_000
    assert usage.cost.input == pytest.approx(3)
    assert usage.cost.output == pytest.approx(3)
    assert usage.cost.cache_read == pytest.approx(0.15)
    assert usage.cost.cache_write == pytest.approx(0.375)
    assert usage.cost.total == pytest.approx(6.525)
