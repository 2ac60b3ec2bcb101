"""Gemini API and Vertex AI providers over real HTTP against the scripted server's Gemini wire
(SSE chunks of GenerateContentResponse, Google's error bodies, an OAuth token endpoint)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio

from tempi.activities.llm import StreamOptions, classify_error, complete, retry_after_ms
from tempi.activities.llm.assembler import MessageAssembler
from tempi.activities.llm.errors import IncompleteStreamError, ProviderError
from tempi.activities.llm.google_shared import _StreamReader, build_request, describe_http_error
from tempi.activities.llm.google_thinking import GoogleApi, thinking_config
from tempi.activities.llm.google_vertex import request_url as vertex_request_url
from tempi.agent.llm_context import LlmContext
from tempi.agent.messages import (
    AssistantMessage,
    ImageContent,
    LlmMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tempi.agent.model_registry import builtin_registry
from tempi.agent.model_spec import ModelCost, ModelSpec, ThinkingLevel
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.scripted_llm.gemini import thought_signature
from tempi.workers.dev_server import free_port
from tests.provider_streams import (
    CONTEXT,
    LONG_TEXT,
    OPTIONS,
    SCRIPTED_CALLS,
    STREAM_SCENARIOS,
    TOOL_THOUGHT,
    TOOLS,
    aborted_after_three_deltas,
    collect,
    final_message,
    per_api,
    scenario,
)

APIS = ["google-generative-ai", "google-vertex"]
PRICES = ModelCost(input=0.3, output=2.5, cache_read=0.075)
SCENARIOS: dict[str, list[dict[str, Any]] | dict[str, Any]] = {
    **STREAM_SCENARIOS,
    # Gemini reports no cache writes.
    "text": [
        {
            "text": "The quick brown fox jumps over the lazy dog.",
            "chunk_size": 5,
            "usage": {"input": 1200, "output": 300, "cacheRead": 100},
        }
    ],
    "rate-limited": [{"text": "after the wait", "fail_times": 1, "fail_status": 429, "retry_after": 2}],
    "unavailable": [{"text": "back again", "fail_times": 1, "fail_status": 503}],
    "unauthenticated": [{"text": "never", "fail_times": 1, "fail_status": 401}],
    "forbidden": [{"text": "never", "fail_times": 1, "fail_status": 403}],
    "handoff": {"turns": [{"text": "Gemini carries on."}], "select": "sequential"},
    "adc": {"turns": [{"text": "first"}, {"text": "second"}], "select": "sequential"},
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def server() -> AsyncIterator[ScriptedLLMServer]:
    async with ScriptedLLMServer(scenarios=per_api(SCENARIOS, APIS)) as running:
        yield running


@pytest.fixture(autouse=True)
def _no_google_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's own Google settings must not decide how Vertex authenticates here."""
    for name in (
        "GOOGLE_CLOUD_API_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_CLOUD_PROJECT",
        "GCLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GEMINI_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)


def model_for(server: ScriptedLLMServer, name: str, api: str, **updates: Any) -> ModelSpec:
    spec = ModelSpec(
        id="gemini-2.5-flash",
        api=api,
        provider="google" if api == "google-generative-ai" else "google-vertex",
        base_url=server.url_for(scenario(name, api), api),
        reasoning=True,
        input=["text", "image"],
        cost=PRICES,
        max_tokens=65536,
    )
    return spec.model_copy(update=updates)


@pytest.mark.parametrize("api", APIS)
async def test_text_streams_in_deltas_with_usage_cache_reads_and_cost(
    server: ScriptedLLMServer, api: str
) -> None:
    events = await collect(model_for(server, "text", api))
    kinds = [event.type for event in events]
    assert kinds[:2] == ["start", "text_start"] and kinds[-2:] == ["text_end", "done"]
    assert kinds.count("text_delta") > 3
    message = final_message(events)
    assert (message.stop_reason, message.text()) == ("stop", "The quick brown fox jumps over the lazy dog.")
    assert message.response_id
    usage = message.usage
    # promptTokenCount 1300 holds the 100 cached tokens: pi counts them apart, as cache reads.
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (1200, 300, 100, 0)
    assert usage.cost.total == pytest.approx((1200 * 0.3 + 300 * 2.5 + 100 * 0.075) / 1_000_000)
    request = server.requests_for(scenario("text", api))[-1]
    assert request.path.endswith("/models/gemini-2.5-flash:streamGenerateContent")
    assert request.query_string == "alt=sse"
    assert request.headers["x-goog-api-key"] == "test-key" and "authorization" not in request.headers


@pytest.mark.parametrize("api", APIS)
async def test_thoughts_stream_as_thinking_with_their_signature(server: ScriptedLLMServer, api: str) -> None:
    events = await collect(
        model_for(server, "thinking", api), options=OPTIONS.model_copy(update={"thinking_level": "high"})
    )
    message = final_message(events)
    thinking, text = message.content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == "Weighing both options carefully."
    assert thinking.thinking_signature == thought_signature("thought:Weighing both options carefully.")
    assert isinstance(text, TextContent) and text.text == "Option B."
    assert text.text_signature == thought_signature("text:Option B.")
    assert [e.type for e in events].count("thinking_delta") >= 2
    body = server.requests_for(scenario("thinking", api))[-1].body
    assert body["generationConfig"] == {
        "maxOutputTokens": 32000,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 24576},
    }


@pytest.mark.parametrize("api", APIS)
async def test_two_turn_tool_calls_replay_thoughts_and_signatures_verbatim(
    server: ScriptedLLMServer, api: str
) -> None:
    model = model_for(server, "tools", api)
    events = await collect(model)
    first = final_message(events)
    assert first.stop_reason == "toolUse"
    calls = first.tool_calls()
    assert [(c.name, c.arguments) for c in calls] == SCRIPTED_CALLS
    assert len({c.id for c in calls}) == 2 and all(c.id.startswith(f"{c.name}_") for c in calls)
    assert calls[0].thought_signature == thought_signature(f"call:read:{TOOL_THOUGHT}")
    assert calls[1].thought_signature is None
    kinds = [e.type for e in events]
    assert kinds.count("toolcall_start") == kinds.count("toolcall_end") == 2

    results: list[LlmMessage] = [
        ToolResultMessage(
            tool_call_id=calls[0].id, tool_name="read", content=[TextContent(text="x = 1")], timestamp=5
        ),
        ToolResultMessage(
            tool_call_id=calls[1].id,
            tool_name="bash",
            content=[TextContent(text="ls: no such directory")],
            is_error=True,
            timestamp=6,
        ),
    ]
    follow_up = CONTEXT.model_copy(update={"messages": [*CONTEXT.messages, first, *results]})
    second = await complete(model, follow_up, OPTIONS)
    assert (second.stop_reason, second.text()) == ("stop", "Both checked.")

    body = server.requests_for(scenario("tools", api))[-1].body
    assert body["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {
                    "thought": True,
                    "text": TOOL_THOUGHT,
                    "thoughtSignature": thought_signature("thought:" + TOOL_THOUGHT),
                },
                {"text": "Checking two things."},
                # The signature goes back exactly as Gemini sent it (standard base64, padded).
                {
                    "functionCall": {"name": "read", "args": {"path": "src/main.py", "limit": 20}},
                    "thoughtSignature": thought_signature(f"call:read:{TOOL_THOUGHT}"),
                },
                {"functionCall": {"name": "bash", "args": {"command": "ls -la && echo 'done'"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read", "response": {"output": "x = 1"}}},
                {"functionResponse": {"name": "bash", "response": {"error": "ls: no such directory"}}},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}
                for t in TOOLS
            ]
        }
    ]


@pytest.mark.parametrize("api", APIS)
async def test_max_tokens_stop_is_length(server: ScriptedLLMServer, api: str) -> None:
    message = final_message(await collect(model_for(server, "length", api)))
    assert (message.stop_reason, message.text()) == ("length", "cut short")


@pytest.mark.parametrize("api", APIS)
async def test_resource_exhausted_is_retryable_with_the_requested_wait(
    server: ScriptedLLMServer, api: str
) -> None:
    model = model_for(server, "rate-limited", api)
    failed = await complete(model, CONTEXT, OPTIONS)
    assert (failed.error_message or "").startswith("429 RESOURCE_EXHAUSTED: Resource has been exhausted")
    assert classify_error(failed) == "retryable"
    assert retry_after_ms(failed) == 2000
    # pi's Google SDK retries nothing by itself: one request, the agent's retries count it.
    assert len(server.requests_for(scenario("rate-limited", api))) == 1
    retried = await complete(model, CONTEXT, OPTIONS)
    assert (retried.stop_reason, retried.text()) == ("stop", "after the wait")


@pytest.mark.parametrize("api", APIS)
async def test_unavailable_is_retryable(server: ScriptedLLMServer, api: str) -> None:
    failed = await complete(model_for(server, "unavailable", api), CONTEXT, OPTIONS)
    assert (failed.error_message or "").startswith("503 UNAVAILABLE: The model is overloaded")
    assert classify_error(failed) == "retryable"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("name", ["unauthenticated", "forbidden"])
async def test_rejected_credentials_are_final_and_say_what_to_set(
    server: ScriptedLLMServer, api: str, name: str
) -> None:
    failed = await complete(model_for(server, name, api), CONTEXT, OPTIONS)
    message = failed.error_message or ""
    assert message.startswith("401 UNAUTHENTICATED" if name == "unauthenticated" else "403 PERMISSION_DENIED")
    assert classify_error(failed) == "fatal"
    variable = "GEMINI_API_KEY" if api == "google-generative-ai" else "GOOGLE_CLOUD_API_KEY"
    provider = "google" if api == "google-generative-ai" else "google-vertex"
    assert f'provider "{provider}"' in message and variable in message


@pytest.mark.parametrize("api", APIS)
async def test_context_overflow_is_classified_as_overflow(server: ScriptedLLMServer, api: str) -> None:
    failed = await complete(model_for(server, "overflow", api), CONTEXT, OPTIONS)
    assert "400 INVALID_ARGUMENT: The input token count" in (failed.error_message or "")
    assert classify_error(failed) == "overflow"


@pytest.mark.parametrize("api", APIS)
async def test_abort_mid_stream_keeps_the_partial_text(server: ScriptedLLMServer, api: str) -> None:
    last = await aborted_after_three_deltas(model_for(server, "slow", api))
    assert LONG_TEXT.startswith(last.error.text()) and 0 < len(last.error.text()) < len(LONG_TEXT)


@pytest.mark.parametrize("api", APIS)
async def test_a_dropped_connection_is_retryable(server: ScriptedLLMServer, api: str) -> None:
    failed = await complete(model_for(server, "dropped", api), CONTEXT, OPTIONS)
    assert failed.stop_reason == "error"
    assert classify_error(failed) == "retryable", failed.error_message


@pytest.mark.parametrize("api", APIS)
async def test_an_unreachable_server_is_a_retryable_connection_error(api: str) -> None:
    model = ModelSpec(
        id="gemini-2.5-flash", api=api, provider="p", base_url=f"http://127.0.0.1:{free_port()}/v1beta"
    )
    failed = await complete(model, CONTEXT, OPTIONS)
    assert (failed.error_message or "").startswith("Connection error"), failed.error_message
    assert classify_error(failed) == "retryable"


@pytest.mark.parametrize("api", APIS)
async def test_model_and_call_headers_reach_the_provider(server: ScriptedLLMServer, api: str) -> None:
    model = model_for(server, "length", api, headers={"x-model-header": "m", "x-both": "model"})
    await complete(model, CONTEXT, OPTIONS.model_copy(update={"headers": {"x-both": "call"}}))
    headers = server.requests_for(scenario("length", api))[-1].headers
    assert (headers["x-model-header"], headers["x-both"]) == ("m", "call")


async def test_gemini_without_a_key_fails_before_any_request(server: ScriptedLLMServer) -> None:
    api = "google-generative-ai"
    before = len(server.requests_for(scenario("text", api)))
    failed = await complete(model_for(server, "text", api), CONTEXT, StreamOptions())
    assert "No API key for provider 'google'" in (failed.error_message or "")
    assert classify_error(failed) == "fatal"
    assert len(server.requests_for(scenario("text", api))) == before


async def test_vertex_takes_google_cloud_api_key_and_ignores_markers(
    server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = "google-vertex"
    monkeypatch.setenv("GOOGLE_CLOUD_API_KEY", "  env-vertex-key ")
    for marker in ("<authenticated>", "gcp-vertex-credentials", None):
        message = await complete(model_for(server, "length", api), CONTEXT, StreamOptions(api_key=marker))
        assert message.stop_reason == "length"
        assert server.requests_for(scenario("length", api))[-1].headers["x-goog-api-key"] == "env-vertex-key"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT/GCLOUD_PROJECT"),
        ({"GCLOUD_PROJECT": "p"}, "Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION"),
        (
            {
                "GOOGLE_CLOUD_PROJECT": "p",
                "GOOGLE_CLOUD_LOCATION": "us-central1",
                "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent.json",
            },
            "set GOOGLE_CLOUD_API_KEY, or set GOOGLE_APPLICATION_CREDENTIALS",
        ),
    ],
)
async def test_vertex_without_a_key_says_what_adc_needs(
    server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    before = len(server.requests)
    failed = await complete(
        model_for(server, "text", "google-vertex"), CONTEXT, StreamOptions(api_key="<authenticated>")
    )
    assert expected in (failed.error_message or "")
    assert classify_error(failed) == "fatal"
    assert len(server.requests) == before


def write_external_account(path: Path, token_url: str) -> Path:
    """An ADC file of workload identity federation: a subject token in a file, exchanged at
    `token_url` (RFC 8693) for an access token."""
    subject = path.parent / "subject-token"
    subject.write_text("scripted-subject-token")
    path.write_text(
        json.dumps(
            {
                "type": "external_account",
                "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q",
                "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                "token_url": token_url,
                "credential_source": {"file": str(subject)},
            }
        )
    )
    return path


async def test_vertex_adc_exchanges_a_token_and_sends_it_as_bearer(
    server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    name = scenario("adc", "google-vertex")
    credentials = write_external_account(tmp_path / "adc.json", server.token_url_for(name))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(credentials))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "scripted-project")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    model = model_for(server, "adc", "google-vertex")
    for expected in ("first", "second"):
        message = await complete(model, CONTEXT, StreamOptions(api_key="<authenticated>"))
        assert (message.stop_reason, message.text()) == ("stop", expected), message.error_message
    requests = server.requests_for(name)
    # The custom base URL takes publisher paths, no project or location (pi's COLLECTION scope).
    assert [r.path for r in requests] == [
        f"/s/{name}/v1/publishers/google/models/gemini-2.5-flash:streamGenerateContent"
    ] * 2
    (token,) = server.issued_tokens_for(name)
    # The token is kept until it expires: the second call exchanged nothing.
    assert [r.headers["authorization"] for r in requests] == [f"Bearer {token}"] * 2
    assert all("x-goog-api-key" not in r.headers for r in requests)
    (exchange,) = server.token_exchanges_for(name)
    recorded = json.loads(
        (Path(__file__).parent / "fixtures/pi-0.73.1/llm-requests/google-vertex-adc.json").read_text()
    )["token_exchanges"][0]
    assert exchange == recorded  # the RFC 8693 exchange pi's google-auth-library made


async def test_an_anthropic_conversation_continues_on_gemini(server: ScriptedLLMServer) -> None:
    """pi's cross-provider handoff: Claude's signed thinking becomes plain text, its tool-call
    ids and signatures are not sent, results go back by function name."""
    claude = AssistantMessage(
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        stop_reason="toolUse",
        timestamp=2,
        content=[
            ThinkingContent(
                thinking="Let me look at the file.", thinking_signature="EqQBCkgIARABGAIiQL+/sig=="
            ),
            ThinkingContent(thinking="", thinking_signature="b3BhcXVl", redacted=True),
            TextContent(text="Reading it."),
            ToolCall(id="toolu_01A09q90qw90lq917835lq9", name="read", arguments={"path": "a.py"}),
        ],
    )
    messages: list[LlmMessage] = [
        UserMessage(
            content=[TextContent(text="What is in a.py?"), ImageContent(data="aGk=", mime_type="image/png")],
            timestamp=1,
        ),
        claude,
        ToolResultMessage(
            tool_call_id="toolu_01A09q90qw90lq917835lq9",
            tool_name="read",
            content=[TextContent(text="x = 1")],
            timestamp=3,
        ),
        UserMessage(content="Now switch to Gemini.", timestamp=4),
    ]
    api = "google-generative-ai"
    context = LlmContext(system_prompt="sys", messages=messages, tools=TOOLS)
    message = await complete(model_for(server, "handoff", api), context, OPTIONS)
    assert (message.stop_reason, message.text()) == ("stop", "Gemini carries on.")
    body = server.requests_for(scenario("handoff", api))[-1].body
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "What is in a.py?"},
                {"inlineData": {"mimeType": "image/png", "data": "aGk="}},
            ],
        },
        {
            "role": "model",
            "parts": [
                {"text": "Let me look at the file."},
                {"text": "Reading it."},
                {"functionCall": {"name": "read", "args": {"path": "a.py"}}},
            ],
        },
        {"role": "user", "parts": [{"functionResponse": {"name": "read", "response": {"output": "x = 1"}}}]},
        {"role": "user", "parts": [{"text": "Now switch to Gemini."}]},
    ]


def catalog_model(provider: str, model_id: str) -> ModelSpec:
    model = builtin_registry().find(provider, model_id)
    assert model is not None, f"{provider}/{model_id} is not in pi's catalog"
    return model


@pytest.mark.parametrize(
    ("provider", "model_id", "level", "expected"),
    [
        ("google", "gemini-2.5-flash", "medium", {"includeThoughts": True, "thinkingBudget": 8192}),
        ("google", "gemini-2.5-flash", "minimal", {"includeThoughts": True, "thinkingBudget": 128}),
        ("google", "gemini-2.5-pro", "xhigh", {"includeThoughts": True, "thinkingBudget": 32768}),
        ("google", "gemini-2.5-flash-lite", "minimal", {"includeThoughts": True, "thinkingBudget": 512}),
        # pi's Vertex provider gives Flash-Lite the Flash budgets.
        (
            "google-vertex",
            "gemini-2.5-flash-lite",
            "minimal",
            {"includeThoughts": True, "thinkingBudget": 128},
        ),
        ("google", "gemini-flash-latest", "high", {"includeThoughts": True, "thinkingBudget": -1}),
        # Gemini 3 Pro has only LOW and HIGH: medium moves up to high, as pi clamps it.
        ("google", "gemini-3.1-pro-preview", "medium", {"includeThoughts": True, "thinkingLevel": "HIGH"}),
        (
            "google-vertex",
            "gemini-3-pro-preview",
            "minimal",
            {"includeThoughts": True, "thinkingLevel": "LOW"},
        ),
        ("google", "gemini-3-flash-preview", "medium", {"includeThoughts": True, "thinkingLevel": "MEDIUM"}),
        ("google", "gemma-4-31b-it", "medium", {"includeThoughts": True, "thinkingLevel": "HIGH"}),
        ("google", "gemini-2.5-flash", "off", {"thinkingBudget": 0}),
        ("google", "gemini-3.1-pro-preview", "off", {"thinkingLevel": "LOW"}),
        ("google-vertex", "gemini-3-flash-preview", "off", {"thinkingLevel": "MINIMAL"}),
        ("google", "gemma-4-31b-it", "off", {"thinkingLevel": "MINIMAL"}),
        ("google", "gemini-2.0-flash", "high", None),
    ],
)
def test_thinking_config_is_pis(provider: str, model_id: str, level: ThinkingLevel, expected: Any) -> None:
    model = catalog_model(provider, model_id)
    assert thinking_config(model, level, cast(GoogleApi, model.api)) == expected


@pytest.mark.parametrize(
    ("base_url", "project", "location", "expected"),
    [
        # The catalog's URL, a template, is no custom URL: the SDK's endpoints apply.
        (
            "https://{location}-aiplatform.googleapis.com",
            None,
            None,
            "https://aiplatform.googleapis.com/v1/publishers/google/models/M",
        ),
        (
            "https://{location}-aiplatform.googleapis.com",
            "proj",
            "europe-west4",
            "https://europe-west4-aiplatform.googleapis.com/v1/projects/proj/locations/europe-west4/publishers/google/models/M",
        ),
        (
            "",
            "proj",
            "global",
            "https://aiplatform.googleapis.com/v1/projects/proj/locations/global/publishers/google/models/M",
        ),
        (
            "",
            "proj",
            "eu",
            "https://aiplatform.eu.rep.googleapis.com/v1/projects/proj/locations/eu/publishers/google/models/M",
        ),
        # A custom URL gets publisher paths, `/v1` unless it names a version itself.
        (
            "https://proxy.example/vertex/",
            "proj",
            "us-central1",
            "https://proxy.example/vertex/v1/publishers/google/models/M",
        ),
        (
            "https://proxy.example/v1beta1",
            None,
            None,
            "https://proxy.example/v1beta1/publishers/google/models/M",
        ),
    ],
)
def test_vertex_urls_are_the_sdks(
    base_url: str, project: str | None, location: str | None, expected: str
) -> None:
    model = ModelSpec(id="M", api="google-vertex", provider="google-vertex", base_url=base_url)
    assert vertex_request_url(model, project, location) == expected + ":streamGenerateContent?alt=sse"


async def read_chunks(chunks: list[Any]) -> MessageAssembler:
    async def source() -> AsyncIterator[Any]:
        for item in chunks:
            yield item

    assembler = MessageAssembler(
        ModelSpec(id="gemini-2.5-flash", api="google-generative-ai", provider="google")
    )
    async for _ in _StreamReader(assembler).events(source()):
        pass
    return assembler


def candidate(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        body["finishReason"] = finish
    return {"candidates": [body]}


async def test_an_error_inside_the_stream_keeps_its_code_for_the_retry_policy() -> None:
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    with pytest.raises(ProviderError, match=r"^503 UNAVAILABLE: The model is overloaded\.$"):
        await read_chunks([candidate({"text": "par"}), error])


async def test_a_safety_stop_is_an_error_but_a_stop_after_calls_is_tool_use() -> None:
    with pytest.raises(ProviderError, match="finish reason SAFETY"):
        await read_chunks([candidate({"text": "I can"}, finish="SAFETY")])
    # pi: any function call makes the turn tool use, whatever the finish reason said.
    call = {"functionCall": {"name": "read", "args": {"path": "a"}}}
    assembler = await read_chunks([candidate(call, finish="MALFORMED_FUNCTION_CALL")])
    assert assembler.message.stop_reason == "toolUse"


async def test_a_blocked_prompt_is_final_and_a_cut_stream_is_incomplete() -> None:
    with pytest.raises(ProviderError, match="block reason: PROHIBITED_CONTENT"):
        await read_chunks([{"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}])
    with pytest.raises(IncompleteStreamError):
        await read_chunks([candidate({"text": "no finish reason"})])


async def test_call_ids_are_made_when_missing_or_repeated_and_text_signatures_kept_per_block() -> None:
    same = {"functionCall": {"id": "c1", "name": "ls", "args": {}}}
    assembler = await read_chunks(
        [
            candidate({"text": "a", "thoughtSignature": "c2lnMQ=="}, {"text": "b"}),
            candidate(same, same, {"functionCall": {"name": "ls"}}, finish="STOP"),
        ]
    )
    text, *calls = assembler.message.content
    # The signature of an earlier delta of the block is not lost to a later unsigned one.
    assert isinstance(text, TextContent) and (text.text, text.text_signature) == ("ab", "c2lnMQ==")
    ids = [call.id for call in calls if isinstance(call, ToolCall)]
    assert ids[0] == "c1" and len(set(ids)) == 3 and all(i.startswith("ls_") for i in ids[1:])


def test_invalid_signatures_and_foreign_images_are_not_sent() -> None:
    """A signature Google cannot decode as base64 would fail the whole call; Gemini 2 takes a
    tool result's images in a user turn of their own, Gemini 3 inside the response."""
    call = ToolCall(id="c", name="read", arguments={"path": "p.png"}, thought_signature="not base64!")
    image = ImageContent(data="aGk=", mime_type="image/png")
    messages: list[LlmMessage] = [
        UserMessage(content="look", timestamp=1),
        AssistantMessage(
            api="google-generative-ai",
            provider="google",
            model="gemini-2.5-flash",
            content=[call],
            stop_reason="toolUse",
            timestamp=2,
        ),
        ToolResultMessage(tool_call_id="c", tool_name="read", content=[image], timestamp=3),
    ]
    context = LlmContext(messages=messages)
    model = ModelSpec(
        id="gemini-2.5-flash", api="google-generative-ai", provider="google", input=["text", "image"]
    )
    contents = build_request(model, context, OPTIONS, "google-generative-ai")["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [{"functionCall": {"name": "read", "args": {"path": "p.png"}}}],
    }
    inline = {"inlineData": {"mimeType": "image/png", "data": "aGk="}}
    assert contents[2:] == [
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "read", "response": {"output": "(see attached image)"}}}],
        },
        {"role": "user", "parts": [{"text": "Tool result image:"}, inline]},
    ]
    gemini3 = model.model_copy(update={"id": "gemini-3-flash-preview"})
    assert build_request(gemini3, context, OPTIONS, "google-generative-ai")["contents"][2:] == [
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "read",
                        "response": {"output": "(see attached image)"},
                        "parts": [inline],
                    }
                }
            ],
        }
    ]


def test_google_error_bodies_as_sent_by_the_gemini_api() -> None:
    """A wrong Gemini key is a 400 whose message names the key; quota errors carry their
    wait in a RetryInfo detail; a stream refused at once answers with a JSON array."""
    invalid_key = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}],
        }
    }
    hint = 'provider "google": check GEMINI_API_KEY'
    described = describe_http_error(400, json.dumps(invalid_key).encode(), {}, hint)
    assert described == f"400 INVALID_ARGUMENT: API key not valid. Please pass a valid API key. ({hint})"
    quota = [
        {
            "error": {
                "code": 429,
                "message": "You exceeded your current quota.",
                "status": "RESOURCE_EXHAUSTED",
                "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}],
            }
        }
    ]
    described = describe_http_error(429, json.dumps(quota).encode(), {}, hint)
    assert described == "429 RESOURCE_EXHAUSTED: You exceeded your current quota. (retry after 37s)"
    assert describe_http_error(502, b"<html>Bad Gateway</html>", {}, hint) == "502 <html>Bad Gateway</html>"


async def test_a_lone_surrogate_in_the_conversation_does_not_break_the_request(
    server: ScriptedLLMServer,
) -> None:
    api = "google-generative-ai"
    context = CONTEXT.model_copy(update={"messages": [UserMessage(content="bad \udcff byte", timestamp=1)]})
    message = await complete(model_for(server, "length", api), context, OPTIONS)
    assert message.stop_reason == "length", message.error_message
    assert server.requests_for(scenario("length", api))[-1].body["contents"][0]["parts"] == [
        {"text": "bad ? byte"}
    ]
