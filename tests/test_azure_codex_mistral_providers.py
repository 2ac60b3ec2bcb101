"""The azure-openai-responses, openai-codex-responses and mistral-conversations providers over
real HTTP against the scripted server: a two-turn tool-calling conversation with thinking
replayed, usage and stop reasons, and failures classified as the retry policy needs them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tempi.activities.llm import StreamOptions, complete
from tempi.activities.llm.azure_openai_responses import azure_base_url
from tempi.activities.llm.errors import classify_error
from tempi.agent.llm_context import LlmContext, ToolSpec
from tempi.agent.messages import (
    LlmMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tempi.agent.model_spec import ModelSpec
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.test_azure_codex_mistral_requests import FAKE_JWT

READ = ToolSpec(
    name="read",
    description="Read a file",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
TURNS: list[dict[str, Any]] = [
    {
        "thinking": "Read it first.",
        "tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}],
        "usage": {"input": 50, "output": 7, "cacheRead": 30},
    },
    {"text": "It says hi.", "usage": {"input": 60, "output": 4}},
]
APIS = {
    "azure-openai-responses": ("azure-openai-responses", "gpt-5.4", "k"),
    "openai-codex-responses": ("openai-codex", "gpt-5.5", FAKE_JWT),
    "mistral-conversations": ("mistral", "magistral-medium-latest", "k"),
}


def model_for(server: ScriptedLLMServer, scenario: str, api: str) -> ModelSpec:
    provider, model_id, _ = APIS[api]
    return ModelSpec(
        id=model_id, api=api, provider=provider, reasoning=True, base_url=server.url_for(scenario, api)
    )


@pytest.mark.parametrize("api", list(APIS))
async def test_a_two_turn_tool_conversation_replays_thinking(api: str) -> None:
    async with ScriptedLLMServer(scenarios={"chat": TURNS}) as server:
        model = model_for(server, "chat", api)
        options = StreamOptions(
            api_key=APIS[api][2], session_id="sess-1", thinking_level="high", sdk_retries=0
        )
        messages: list[LlmMessage] = [UserMessage(content="What does a.txt say?", timestamp=1)]
        context = LlmContext(system_prompt="Be brief.", messages=messages, tools=[READ])

        first = await complete(model, context, options)
        assert first.stop_reason == "toolUse", first.error_message
        thinking, call = first.content
        assert isinstance(thinking, ThinkingContent) and thinking.thinking == "Read it first."
        assert isinstance(call, ToolCall) and call.name == "read" and call.arguments == {"path": "a.txt"}
        if api == "mistral-conversations":
            assert len(call.id) == 9 and call.id.isalnum()
            assert (first.usage.input, first.usage.output) == (50, 7)
        else:
            # Cached prompt tokens are counted apart from the fresh ones.
            assert (first.usage.input, first.usage.cache_read, first.usage.output) == (50, 30, 7)

        messages += [
            first,
            ToolResultMessage(
                tool_call_id=call.id, tool_name="read", content=[TextContent(text="hi")], timestamp=3
            ),
        ]
        second = await complete(
            model, LlmContext(system_prompt="Be brief.", messages=messages, tools=[READ]), options
        )
        assert second.stop_reason == "stop", second.error_message
        assert second.content == [
            TextContent(text="It says hi.", text_signature=second.content[0].text_signature)
        ]

        replay = server.requests_for("chat")[1].body
        if api == "mistral-conversations":
            assistant = replay["messages"][2]
            assert assistant["content"] == [
                {"type": "thinking", "thinking": [{"type": "text", "text": "Read it first."}]}
            ]
            assert assistant["tool_calls"][0]["id"] == call.id and assistant["prefix"] is False
            assert replay["messages"][3] == {
                "role": "tool",
                "content": [{"type": "text", "text": "hi"}],
                "tool_call_id": call.id,
                "name": "read",
            }
        else:
            # The reasoning item comes back whole, with the encrypted content store=false needs.
            reasoning = next(item for item in replay["input"] if item.get("type") == "reasoning")
            assert reasoning == json.loads(thinking.thinking_signature or "")
            assert reasoning["encrypted_content"].startswith("enc_")
            assert {
                "type": "function_call_output",
                "call_id": call.id.split("|")[0],
                "output": "hi",
            } in replay["input"]


async def test_azure_base_url_comes_from_the_environment_first(monkeypatch: pytest.MonkeyPatch) -> None:
    model = ModelSpec(
        id="gpt-5.4", api="azure-openai-responses", provider="azure-openai-responses", base_url=""
    )
    custom = model.model_copy(update={"base_url": "https://proxy.example/openai/v1/"})
    assert azure_base_url(custom, {}) == "https://proxy.example/openai/v1"
    assert (
        azure_base_url(custom, {"AZURE_OPENAI_RESOURCE_NAME": "res"})
        == "https://res.openai.azure.com/openai/v1"
    )
    env = {
        "AZURE_OPENAI_RESOURCE_NAME": "res",
        "AZURE_OPENAI_BASE_URL": "https://me.cognitiveservices.azure.com/",
    }
    assert azure_base_url(custom, env) == "https://me.cognitiveservices.azure.com/openai/v1"
    assert azure_base_url(model, {"AZURE_OPENAI_BASE_URL": "https://x.openai.azure.com/openai"}) == (
        "https://x.openai.azure.com/openai/v1"
    )

    monkeypatch.delenv("AZURE_OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("AZURE_OPENAI_RESOURCE_NAME", raising=False)
    message = await complete(model, LlmContext(messages=[]), StreamOptions(api_key="k"))
    assert message.stop_reason == "error"
    assert message.error_message is not None and "Azure OpenAI base URL is required" in message.error_message
    assert (
        "AZURE_OPENAI_BASE_URL" in message.error_message
        and "AZURE_OPENAI_RESOURCE_NAME" in message.error_message
    )

    async with ScriptedLLMServer(scenarios={"one": [{"text": "ok"}]}) as server:
        # The variable wins over the model's own base URL (here one that answers nothing).
        monkeypatch.setenv("AZURE_OPENAI_BASE_URL", server.url_for("one", "azure-openai-responses"))
        wrong = model.model_copy(update={"base_url": "http://127.0.0.1:9/openai/v1"})
        message = await complete(wrong, LlmContext(messages=[]), StreamOptions(api_key="k", sdk_retries=0))
        assert message.stop_reason == "stop", message.error_message


@pytest.mark.parametrize(
    ("api", "names"),
    [
        ("azure-openai-responses", ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_BASE_URL")),
        ("openai-codex-responses", ("/login", "auth.json")),
        ("mistral-conversations", ("MISTRAL_API_KEY",)),
    ],
)
async def test_a_refused_key_is_final_and_says_what_to_set(api: str, names: tuple[str, ...]) -> None:
    async with ScriptedLLMServer(scenarios={"auth": [{"fail_times": 9, "fail_status": 401}]}) as server:
        message = await complete(
            model_for(server, "auth", api), LlmContext(messages=[]), StreamOptions(api_key=APIS[api][2])
        )
        assert message.stop_reason == "error" and message.error_message is not None
        assert message.error_message.startswith("401")
        for name in names:
            assert name in message.error_message
        assert classify_error(message) == "fatal"
        # No quiet retries of a refused key.
        assert len(server.requests_for("auth")) == 1


@pytest.mark.parametrize(
    ("api", "attempts"),
    # pi's own retries: the SDK default (2, as set here) on Azure, three on Codex, none on Mistral.
    [("azure-openai-responses", 3), ("openai-codex-responses", 4), ("mistral-conversations", 1)],
)
async def test_rate_limits_and_server_errors_are_retryable(api: str, attempts: int) -> None:
    turns = [{"fail_times": 9, "fail_status": 429, "retry_after": 0.01}]
    async with ScriptedLLMServer(scenarios={"busy": turns}) as server:
        message = await complete(
            model_for(server, "busy", api),
            LlmContext(messages=[]),
            StreamOptions(api_key=APIS[api][2], sdk_retries=2),
        )
        assert message.error_message is not None and message.error_message.startswith("429")
        assert classify_error(message) == "retryable"
        assert len(server.requests_for("busy")) == attempts


async def test_codex_refuses_a_key_that_is_no_chatgpt_login() -> None:
    model = ModelSpec(id="gpt-5.5", api="openai-codex-responses", provider="openai-codex")
    for token in ("sk-not-a-jwt", "a.e30.c"):  # three parts, but no account claim
        message = await complete(model, LlmContext(messages=[]), StreamOptions(api_key=token))
        assert message.stop_reason == "error" and message.error_message is not None
        assert "/login" in message.error_message and "auth.json" in message.error_message
