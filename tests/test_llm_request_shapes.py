"""Request bodies compared with what pi 0.73.1 sent for the same conversation.

pi's `basic` session is replayed from its session file; the body tempi builds must have
pi's structure: same keys, message placement, tool definitions, cache hints and limits.
Prose (system prompt, tool descriptions) is tempi's own, so only its type is compared.
"""

from __future__ import annotations

import json
from typing import Any

from tempi.activities.llm import (
    StreamOptions,
    anthropic_messages,
    complete,
    openai_completions,
    openai_responses,
)
from tempi.agent.llm_context import LlmContext, ToolSpec
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
from tempi.agent.model_spec import ModelSpec
from tempi.agent.tools.edit import DEFINITION as EDIT
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.pi_recordings import pi_conversation, pi_request

OPENAI_MODEL = ModelSpec(
    id="mock-model",
    api="openai-completions",
    provider="mock",
    max_tokens=16384,
    compat={"supportsDeveloperRole": False, "supportsReasoningEffort": False},
)
CLAUDE_MODEL = ModelSpec(id="mock-claude", api="anthropic-messages", provider="mocka", max_tokens=16384)
OPTIONS = StreamOptions(api_key="k")
SYSTEM_PROMPT = "You are tempi, a coding agent."


def pi_tools() -> list[ToolSpec]:
    return [
        ToolSpec(
            name=t["function"]["name"],
            description=f"tempi's {t['function']['name']}",
            parameters=t["function"]["parameters"],
        )
        for t in pi_request("openai-chat-completions")["body"]["tools"]
    ]


def test_openai_chat_body_matches_pi() -> None:
    expected = pi_request("openai-chat-completions")["body"]
    context = LlmContext(
        system_prompt=SYSTEM_PROMPT, messages=pi_conversation("basic-openai"), tools=pi_tools()
    )
    body = openai_completions.build_request(OPENAI_MODEL, context, OPTIONS)

    assert set(body) == set(expected)
    for key in ("model", "stream", "stream_options", "store", "max_completion_tokens"):
        assert body[key] == expected[key], key
    assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    # Everything after the system prompt is conversation data, identical to what pi sent.
    assert body["messages"][1:] == expected["messages"][1:]
    for ours, theirs in zip(body["tools"], expected["tools"], strict=True):
        assert set(ours) == set(theirs) and set(ours["function"]) == set(theirs["function"])
        assert ours["function"]["name"] == theirs["function"]["name"]
        assert ours["function"]["parameters"] == theirs["function"]["parameters"]
        assert ours["function"]["strict"] is False


def test_anthropic_body_matches_pi() -> None:
    expected = pi_request("anthropic-messages")["body"]
    context = LlmContext(
        system_prompt=SYSTEM_PROMPT, messages=pi_conversation("basic-anthropic"), tools=pi_tools()
    )
    body = anthropic_messages.build_request(CLAUDE_MODEL, context, OPTIONS)

    assert set(body) == set(expected)
    for key in ("model", "stream", "max_tokens"):
        assert body[key] == expected[key], key
    assert body["system"] == [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}]
    # Tool results merged into user messages, cache hint on the very last block: as pi sent them.
    assert body["messages"] == expected["messages"]
    for ours, theirs in zip(body["tools"], expected["tools"], strict=True):
        assert set(ours) == set(theirs)
        assert ours["name"] == theirs["name"]
        assert ours["input_schema"] == theirs["input_schema"]
    assert [t.get("cache_control") for t in body["tools"]] == [None, None, None, {"type": "ephemeral"}]


def test_summary_call_without_tools_matches_pi() -> None:
    expected = pi_request("compaction-summary")["body"]
    context = LlmContext(
        system_prompt="Summarise.",
        messages=[UserMessage(content=[TextContent(text="<conversation>\n\n</conversation>")], timestamp=1)],
    )
    body = openai_completions.build_request(
        OPENAI_MODEL, context, StreamOptions(api_key="k", max_tokens=13107)
    )
    assert set(body) == set(expected)
    assert body["max_completion_tokens"] == expected["max_completion_tokens"] == 13107
    assert [m["role"] for m in body["messages"]] == [m["role"] for m in expected["messages"]]
    assert isinstance(body["messages"][1]["content"], list)


def test_openai_chat_reasoning_models_use_the_developer_role_and_effort() -> None:
    model = ModelSpec(id="o-model", api="openai-completions", provider="openai", reasoning=True)
    body = openai_completions.build_request(
        model,
        LlmContext(system_prompt="sys", messages=[]),
        StreamOptions(thinking_level="medium", session_id="s1"),
    )
    assert body["messages"][0]["role"] == "developer"
    assert body["reasoning_effort"] == "medium"
    assert body["prompt_cache_key"] == "s1"


def test_tool_result_images_follow_the_results_for_image_models() -> None:
    image = ImageContent(data="aGk=", mime_type="image/png")
    model = ModelSpec(id="vision", api="openai-completions", provider="p", input=["text", "image"])
    messages: list[LlmMessage] = [
        UserMessage(content="look", timestamp=1),
        AssistantMessage(
            content=[ToolCall(id="a", name="read"), ToolCall(id="b", name="read")],
            api=model.api,
            provider=model.provider,
            model=model.id,
            stop_reason="toolUse",
            timestamp=2,
        ),
        ToolResultMessage(tool_call_id="a", tool_name="read", content=[image], timestamp=3),
        ToolResultMessage(
            tool_call_id="b", tool_name="read", content=[TextContent(text="text")], timestamp=3
        ),
    ]
    chat = openai_completions.build_request(model, LlmContext(messages=messages), OPTIONS)["messages"]
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "tool", "user"]
    assert chat[2]["content"] == "(see attached image)"
    assert chat[4]["content"][1]["image_url"]["url"] == "data:image/png;base64,aGk="

    responses_model = model.model_copy(update={"api": "openai-responses"})
    for message in messages:
        if isinstance(message, AssistantMessage):
            message.api = "openai-responses"
    items = openai_responses.build_request(responses_model, LlmContext(messages=messages), OPTIONS)["input"]
    kinds = [item.get("type", item.get("role")) for item in items]
    assert kinds == [
        "user",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "user",
    ]
    assert items[-1]["content"][1] == {
        "type": "input_image",
        "detail": "auto",
        "image_url": "data:image/png;base64,aGk=",
    }

    claude = anthropic_messages.build_request(
        CLAUDE_MODEL.model_copy(update={"input": ["text", "image"]}), LlmContext(messages=messages), OPTIONS
    )["messages"]
    results = claude[-1]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result"]
    assert [b["type"] for b in results[0]["content"]] == ["text", "image"]


def test_responses_body_replays_reasoning_and_item_ids_for_the_same_model() -> None:
    model = ModelSpec(id="gpt-r", api="openai-responses", provider="openai", reasoning=True)
    reasoning_item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"}
    assistant = AssistantMessage(
        content=[
            ThinkingContent(thinking="", thinking_signature=json.dumps(reasoning_item)),
            TextContent(text="Reading.", text_signature="msg_abc"),
            ToolCall(id="call_1|fc_1", name="read", arguments={"path": "a"}),
        ],
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason="toolUse",
        timestamp=2,
    )
    messages: list[LlmMessage] = [
        UserMessage(content="go", timestamp=1),
        assistant,
        ToolResultMessage(
            tool_call_id="call_1|fc_1", tool_name="read", content=[TextContent(text="x")], timestamp=3
        ),
    ]
    body = openai_responses.build_request(
        model,
        LlmContext(system_prompt="sys", messages=messages, tools=pi_tools()[:1]),
        StreamOptions(thinking_level="high"),
    )
    assert body["input"][0] == {"role": "developer", "content": "sys"}
    assert body["input"][2] == reasoning_item
    assert body["input"][3]["id"] == "msg_abc"
    assert body["input"][4] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "read",
        "arguments": '{"path":"a"}',
        "id": "fc_1",
    }
    assert body["input"][5] == {"type": "function_call_output", "call_id": "call_1", "output": "x"}
    assert body["store"] is False and body["max_output_tokens"] == 16384
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["tools"][0] == {
        "type": "function",
        "name": "read",
        "description": "tempi's read",
        "parameters": pi_tools()[0].parameters,
        "strict": False,
    }

    other = openai_responses.build_request(
        model.model_copy(update={"id": "gpt-other"}), LlmContext(messages=messages), OPTIONS
    )
    call = next(item for item in other["input"] if item.get("type") == "function_call")
    assert "id" not in call and not any(item.get("type") == "reasoning" for item in other["input"])


def test_anthropic_replays_signed_thinking_and_turns_unsigned_thinking_into_text() -> None:
    model = CLAUDE_MODEL.model_copy(update={"reasoning": True})
    assistant = AssistantMessage(
        content=[
            ThinkingContent(thinking="signed", thinking_signature="sig"),
            ThinkingContent(thinking="[redacted]", thinking_signature="opaque", redacted=True),
            ThinkingContent(thinking="cut off before its signature"),
            TextContent(text="answer"),
        ],
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason="stop",
        timestamp=2,
    )
    messages: list[LlmMessage] = [
        UserMessage(content="q", timestamp=1),
        assistant,
        UserMessage(content="more", timestamp=3),
    ]
    body = anthropic_messages.build_request(model, LlmContext(messages=messages), OPTIONS)
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "signed", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "cut off before its signature"},
        {"type": "text", "text": "answer"},
    ]
    assert body["messages"][2]["content"] == [
        {"type": "text", "text": "more", "cache_control": {"type": "ephemeral"}}
    ]
    assert "system" not in body and "tools" not in body


def fixture_headers(name: str) -> dict[str, str]:
    headers: dict[str, str] = pi_request(name.removesuffix(".json"))["headers"]
    return {key.lower(): value for key, value in headers.items()}


async def sent_headers(api: str, options: StreamOptions, **model_updates: Any) -> dict[str, str]:
    """The headers of one real request tempi sends to the scripted server."""
    async with ScriptedLLMServer(scenarios={"one": [{"text": "ok"}]}) as server:
        model = ModelSpec(id="m", api=api, provider="mock", base_url=server.url_for("one", api))
        message = await complete(model.model_copy(update=model_updates), LlmContext(messages=[]), options)
        assert message.stop_reason == "stop", message.error_message
        return server.requests_for("one")[-1].headers


async def test_anthropic_sends_an_api_key_as_x_api_key_like_pi() -> None:
    pi = fixture_headers("anthropic-messages.json")
    assert pi["x-api-key"] == "mock-key" and "authorization" not in pi

    headers = await sent_headers("anthropic-messages", StreamOptions(api_key="mock-key"))
    assert headers["x-api-key"] == pi["x-api-key"]
    assert "authorization" not in headers
    assert headers["anthropic-beta"] == pi["anthropic-beta"]


def _without_prose(schema: Any) -> Any:
    """A JSON schema with its descriptions dropped: tempi words them its own way."""
    if isinstance(schema, dict):
        return {k: _without_prose(v) for k, v in schema.items() if k != "description"}
    return schema


def test_the_edit_tool_schema_is_pis_on_both_openai_apis() -> None:
    """pi's edit schema forbids extra keys at both levels (its other tools do not say);
    the OpenAI APIs get the schema as it is, Anthropic only its properties and required."""
    recorded = {
        t["function"]["name"]: t["function"]["parameters"]
        for t in pi_request("openai-chat-completions")["body"]["tools"]
    }
    assert recorded["edit"]["additionalProperties"] is False
    assert all("additionalProperties" not in recorded[name] for name in ("read", "bash", "write"))
    context = LlmContext(messages=[], tools=[EDIT.spec])

    chat = openai_completions.build_request(OPENAI_MODEL, context, OPTIONS)["tools"][0]["function"]
    responses_model = OPENAI_MODEL.model_copy(update={"api": "openai-responses"})
    responses = openai_responses.build_request(responses_model, context, OPTIONS)["tools"][0]
    for parameters in (chat["parameters"], responses["parameters"]):
        assert _without_prose(parameters) == _without_prose(recorded["edit"])

    anthropic = anthropic_messages.build_request(CLAUDE_MODEL, context, OPTIONS)["tools"][0]["input_schema"]
    assert _without_prose(anthropic) == _without_prose(
        pi_request("anthropic-messages")["body"]["tools"][2]["input_schema"]
    )


async def test_responses_send_pis_session_affinity_headers() -> None:
    """pi (openai-responses.js createClient): `session_id` (compat sendSessionIdHeader, default
    true) and `x-client-request-id`, both the session id; per-call headers win."""
    options = StreamOptions(api_key="k", session_id="sess-1234")
    headers = await sent_headers("openai-responses", options)
    assert headers["session_id"] == headers["x-client-request-id"] == "sess-1234"

    headers = await sent_headers("openai-responses", options, compat={"sendSessionIdHeader": False})
    assert "session_id" not in headers and headers["x-client-request-id"] == "sess-1234"

    overridden = options.model_copy(update={"headers": {"x-client-request-id": "mine"}})
    headers = await sent_headers("openai-responses", overridden, headers={"session_id": "model's"})
    assert headers["session_id"] == "sess-1234" and headers["x-client-request-id"] == "mine"

    headers = await sent_headers("openai-responses", StreamOptions(api_key="k"))
    assert "session_id" not in headers and "x-client-request-id" not in headers
