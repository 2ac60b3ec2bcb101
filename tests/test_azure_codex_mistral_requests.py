"""azure-openai-responses, openai-codex-responses and mistral-conversations requests compared
with what pi 0.73.1 sent (recorded by scripts/record_pi_provider_requests.py).

Each recording is the second request of a two-turn tool-calling conversation (thinking and a
`read` call, its result); tempi rebuilds it from pi's own session file, with pi's system
prompt and tools, so the bodies must be equal: the session id pi used is the session id here.
"""

from __future__ import annotations

from typing import Any

import pytest

from tempi.activities.llm import StreamOptions, complete
from tempi.activities.llm import azure_openai_responses as azure
from tempi.activities.llm import mistral_conversations as mistral
from tempi.activities.llm import openai_codex_responses as codex
from tempi.agent.llm_context import LlmContext, ToolSpec
from tempi.agent.messages import (
    AssistantMessage,
    LlmMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tempi.agent.model_catalog import CATALOG_MODELS
from tempi.agent.model_spec import ModelSpec
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.pi_recordings import pi_request, pi_session

FAKE_JWT = (
    "eyJhbGciOiAibm9uZSIsICJ0eXAiOiAiSldUIn0."
    "eyJodHRwczovL2FwaS5vcGVuYWkuY29tL2F1dGgiOiB7ImNoYXRncHRfYWNjb3VudF9pZCI6ICJhY2MtMTIzNCJ9LCAiZXhwIjogNDEwMjQ0NDgwMH0."
    "c2lnbmF0dXJl"
)


def catalog_model(provider: str, model_id: str, **updates: Any) -> ModelSpec:
    model = next(m for m in CATALOG_MODELS if m.provider == provider and m.id == model_id)
    return model.model_copy(update=updates)


def pi_context(name: str, system_prompt: str, tools: list[dict[str, Any]]) -> tuple[LlmContext, str]:
    session_id, messages = pi_session(name)
    specs = [
        ToolSpec(name=t["name"], description=t["description"], parameters=t["parameters"])
        for t in (tool.get("function", tool) for tool in tools)
    ]
    return LlmContext(system_prompt=system_prompt, messages=messages, tools=specs), session_id


def test_azure_body_is_pis() -> None:
    expected = pi_request("azure-openai-responses")["body"]
    context, session_id = pi_context(
        "azure-openai-responses", expected["input"][0]["content"], expected["tools"]
    )
    model = catalog_model("azure-openai-responses", "gpt-5.4")
    environ = {"AZURE_OPENAI_DEPLOYMENT_NAME_MAP": "gpt-5.4=tempi-deployment,other=x"}
    options = StreamOptions(api_key="k", session_id=session_id, thinking_level="medium")

    body = azure.build_request(model, context, options, environ)
    # Deployment name, no `store`, the session id as cache key, reasoning replayed as pi does.
    assert body == expected
    assert body["model"] == "tempi-deployment" and "store" not in body


def test_codex_body_is_pis() -> None:
    expected = pi_request("openai-codex-responses")["body"]
    context, session_id = pi_context("openai-codex-responses", expected["instructions"], expected["tools"])
    model = catalog_model("openai-codex", "gpt-5.5")
    options = StreamOptions(api_key=FAKE_JWT, session_id=session_id, thinking_level="medium")

    body = codex.build_request(model, context, options)
    assert body == expected
    assert body["tools"][0]["strict"] is None and body["text"] == {"verbosity": "low"}


@pytest.mark.parametrize(
    ("name", "model_id", "level"),
    [
        ("mistral-conversations", "magistral-medium-latest", "medium"),
        ("mistral-conversations-effort", "mistral-small-latest", "high"),
    ],
)
def test_mistral_body_is_pis(name: str, model_id: str, level: Any) -> None:
    expected = pi_request(name)["body"]
    context, session_id = pi_context(name, expected["messages"][0]["content"], expected["tools"])
    options = StreamOptions(api_key="k", session_id=session_id, thinking_level=level)

    body = mistral.build_request(catalog_model("mistral", model_id), context, options)
    assert body == expected


def test_mistral_rewrites_another_providers_tool_call_ids_as_pi_does() -> None:
    """pi's ids for calls made by other providers (computed with pi's own shortHash)."""
    model = catalog_model("mistral", "devstral-medium-latest")
    calls = [ToolCall(id="toolu_01ABCdef|x", name="read"), ToolCall(id="call_1|fc_2", name="read")]
    messages: list[LlmMessage] = [
        UserMessage(content="go", timestamp=1),
        AssistantMessage(
            content=calls,
            api="anthropic-messages",
            provider="anthropic",
            model="c",
            stop_reason="toolUse",
            timestamp=2,
        ),
        *(
            ToolResultMessage(
                tool_call_id=c.id, tool_name="read", content=[TextContent(text="x")], timestamp=3
            )
            for c in calls
        ),
    ]
    body = mistral.build_request(model, LlmContext(messages=messages), StreamOptions(api_key="k"))
    assert [c["id"] for c in body["messages"][1]["tool_calls"]] == ["1xilvipza", "101c6gjjo"]
    assert [m["tool_call_id"] for m in body["messages"][2:]] == ["1xilvipza", "101c6gjjo"]
    assert "prompt_mode" not in body and "reasoning_effort" not in body


async def sent(
    api: str, model: ModelSpec, options: StreamOptions, **env: str
) -> tuple[dict[str, str], dict[str, str]]:
    """Headers and query of one real request tempi sends to the scripted server."""
    async with ScriptedLLMServer(scenarios={"one": [{"text": "ok"}]}) as server:
        base = server.url_for("one", api)
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value.format(base=base))
            message = await complete(
                model.model_copy(update={"base_url": base}), LlmContext(messages=[]), options
            )
        assert message.stop_reason == "stop", message.error_message
        request = server.requests_for("one")[-1]
        return request.headers, request.query


def _headers(name: str) -> dict[str, str]:
    return {key.lower(): value for key, value in pi_request(name)["headers"].items()}


async def test_azure_sends_the_key_and_api_version_as_pi() -> None:
    pi = pi_request("azure-openai-responses")
    model = catalog_model("azure-openai-responses", "gpt-5.4")
    headers, query = await sent(
        "azure-openai-responses", model, StreamOptions(api_key="mock-key", session_id="s")
    )
    assert headers["api-key"] == _headers("azure-openai-responses")["api-key"] == "mock-key"
    assert "authorization" not in headers and "authorization" not in _headers("azure-openai-responses")
    assert query == pi["query"] == {"api-version": "v1"}
    # pi sends no affinity headers on Azure: the cache key is in the body.
    assert "session_id" not in headers and "x-client-request-id" not in headers

    _, query = await sent(
        "azure-openai-responses",
        model,
        StreamOptions(api_key="k"),
        AZURE_OPENAI_API_VERSION="2025-04-01-preview",
    )
    assert query == {"api-version": "2025-04-01-preview"}


async def test_codex_sends_pis_headers() -> None:
    pi = _headers("openai-codex-responses")
    model = catalog_model("openai-codex", "gpt-5.5")
    session = "01a21be5-9cb8-778d-b985-1ed22c3d249d"
    headers, _ = await sent(
        "openai-codex-responses", model, StreamOptions(api_key=FAKE_JWT, session_id=session)
    )
    for name in (
        "authorization",
        "chatgpt-account-id",
        "openai-beta",
        "accept",
        "content-type",
        "session_id",
        "x-client-request-id",
    ):
        assert headers[name] == pi[name], name
    # tempi names itself where pi names itself; the SDK's own headers are not sent, as pi sends none.
    assert (headers["originator"], pi["originator"]) == ("tempi", "pi")
    assert headers["user-agent"].startswith("tempi (") and pi["user-agent"].startswith("pi (")
    assert not [name for name in headers if name.startswith("x-stainless")]
    assert set(headers) - {"user-agent"} == set(pi) - {"user-agent", "accept-language", "sec-fetch-mode"}


async def test_mistral_sends_pis_headers() -> None:
    pi = _headers("mistral-conversations")
    model = catalog_model("mistral", "magistral-medium-latest")
    session = "01a21be5-a066-7579-8fec-0751b7973a23"
    headers, _ = await sent(
        "mistral-conversations", model, StreamOptions(api_key="mock-key", session_id=session)
    )
    for name in ("authorization", "x-affinity", "accept", "content-type"):
        assert headers[name] == pi[name], name
