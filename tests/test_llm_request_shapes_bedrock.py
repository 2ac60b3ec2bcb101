"""tempi's Bedrock requests compared with what pi 0.73.1 sent (recorded by
scripts/record_pi_bedrock.py): the conversation of pi's session file is sent again through
tempi's provider to the same scripted endpoint, and path, auth and body must match pi's
except volatile values (date, signature, SDK ids) and prose (system prompt, tool
descriptions: compared by type)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from tempi.activities.llm import StreamOptions, complete
from tempi.activities.llm.bedrock_request import build_request
from tempi.agent.llm_context import LlmContext, ToolSpec
from tempi.agent.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    UserMessage,
)
from tempi.agent.model_catalog import BUILTIN_MODELS
from tempi.agent.model_spec import ModelSpec, ThinkingLevel
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.testing.scripted_llm.bedrock_auth import (
    SCRIPTED_AWS_ACCESS_KEY_ID,
    SCRIPTED_AWS_SECRET_ACCESS_KEY,
    parse_sigv4,
)
from tests.pi_recordings import pi_conversation, pi_request

API = "bedrock-converse-stream"
MODEL_ID = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def pi_tools(body: dict[str, Any]) -> list[ToolSpec]:
    return [
        ToolSpec(
            name=spec["name"], description=f"tempi's {spec['name']}", parameters=spec["inputSchema"]["json"]
        )
        for spec in (tool["toolSpec"] for tool in body["toolConfig"]["tools"])
    ]


def catalog_model(base_url: str) -> ModelSpec:
    model = next(m for m in BUILTIN_MODELS if m.provider == "amazon-bedrock" and m.id == MODEL_ID)
    return model.model_copy(update={"base_url": base_url})


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith(("AWS_", "PI_CACHE")):
            monkeypatch.delenv(name)
    # What the recording gave pi.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", SCRIPTED_AWS_ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SCRIPTED_AWS_SECRET_ACCESS_KEY)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    yield


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def server() -> AsyncIterator[ScriptedLLMServer]:
    async with ScriptedLLMServer(
        {"bedrock": [{"text": "ok"}] * 3, "bedrock-bearer": [{"text": "ok"}]}
    ) as running:
        yield running


async def test_request_matches_pis_except_volatile_values(server: ScriptedLLMServer) -> None:
    pi = pi_request("bedrock-converse-stream")
    expected = pi["body"]
    context = LlmContext(
        system_prompt="You are tempi, a coding agent.",
        messages=pi_conversation("bedrock-tools"),
        tools=pi_tools(expected),
    )
    model = catalog_model(server.url_for("bedrock", API))
    answer = await complete(model, context, StreamOptions(api_key="<authenticated>", thinking_level="medium"))
    assert answer.text() == "ok", answer.error_message
    request = server.requests_for("bedrock")[-1]

    assert request.raw_path == pi["path"]
    body = request.body
    assert list(body) == list(expected)
    # The conversation is data: reasoning replayed with its signature, the results of one
    # turn in one message, the cache point last, all as pi sent them.
    assert body["messages"] == expected["messages"]
    assert body["inferenceConfig"] == expected["inferenceConfig"] == {"maxTokens": 40192}
    assert body["additionalModelRequestFields"] == expected["additionalModelRequestFields"]
    assert [list(block) for block in body["system"]] == [["text"], ["cachePoint"]]
    assert body["system"][1] == expected["system"][1]
    for ours, theirs in zip(body["toolConfig"]["tools"], expected["toolConfig"]["tools"], strict=True):
        assert ours["toolSpec"]["name"] == theirs["toolSpec"]["name"]
        assert ours["toolSpec"]["inputSchema"] == theirs["toolSpec"]["inputSchema"]
        assert isinstance(ours["toolSpec"]["description"], str)

    ours_sig = parse_sigv4(request.headers["authorization"])
    theirs_sig = parse_sigv4(pi["headers"]["authorization"])
    assert ours_sig is not None and theirs_sig is not None
    assert (ours_sig.access_key, ours_sig.region, ours_sig.service) == (
        theirs_sig.access_key,
        theirs_sig.region,
        theirs_sig.service,
    )
    # What the signature covers that matters: the host, the date, the body's type.
    assert {"host", "x-amz-date", "content-type"} <= set(ours_sig.signed_headers) & set(
        theirs_sig.signed_headers
    )
    assert request.headers["content-type"] == pi["headers"]["content-type"] == "application/json"
    assert request.status == 200  # the signature verified


async def test_bearer_request_matches_pis(server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    pi = pi_request("bedrock-converse-stream-bearer")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "scripted-bedrock-api-key")
    context = LlmContext(system_prompt="sys", messages=[UserMessage(content="hi", timestamp=1)])
    model = catalog_model(server.url_for("bedrock-bearer", API))
    answer = await complete(model, context, StreamOptions(thinking_level="medium"))
    assert answer.text() == "ok", answer.error_message
    request = server.requests_for("bedrock-bearer")[-1]
    assert request.raw_path == pi["path"]
    assert request.headers["authorization"] == pi["headers"]["authorization"]
    assert "x-amz-date" not in request.headers
    assert request.body["additionalModelRequestFields"] == pi["body"]["additionalModelRequestFields"]
    assert request.body["inferenceConfig"] == pi["body"]["inferenceConfig"]


def _model(model_id: str, **updates: Any) -> ModelSpec:
    base = ModelSpec(id=model_id, api=API, provider="amazon-bedrock", reasoning=True, max_tokens=64_000)
    return base.model_copy(update=updates)


def _body(
    model: ModelSpec, level: ThinkingLevel = "off", env: dict[str, str] | None = None, **context: Any
) -> dict[str, Any]:
    messages = context.pop("messages", [UserMessage(content="hi", timestamp=1)])
    options = StreamOptions(thinking_level=level)
    return build_request(
        model, LlmContext(system_prompt="sys", messages=messages, **context), options, env or {}
    )


def test_adaptive_claude_thinking_takes_an_effort() -> None:
    opus6 = _model("global.anthropic.claude-opus-4-6-v1", thinking_level_map={"xhigh": "max"})
    body = _body(opus6, "xhigh")
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": "max"},
    }
    assert body["inferenceConfig"] == {"maxTokens": 32_000}  # no budget added
    opus7 = _model("us.anthropic.claude-opus-4-7", thinking_level_map={"xhigh": "xhigh"})
    assert _body(opus7, "xhigh")["additionalModelRequestFields"]["output_config"] == {"effort": "xhigh"}
    assert _body(opus7, "minimal")["additionalModelRequestFields"]["output_config"] == {"effort": "low"}
    # An application inference profile: the ARN hides the model, its name tells.
    profile = _model("arn:aws:bedrock:us-east-1:1:application-inference-profile/x", name="Claude Sonnet 4.6")
    assert _body(profile, "high")["additionalModelRequestFields"]["thinking"]["type"] == "adaptive"


def test_govcloud_omits_the_thinking_display() -> None:
    model = _model("us-gov.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert _body(model, "low")["additionalModelRequestFields"]["thinking"] == {
        "type": "enabled",
        "budget_tokens": 2048,
    }
    other = _model("anthropic.claude-sonnet-4-5-20250929-v1:0")
    fields = _body(other, "low", {"AWS_REGION": "us-gov-west-1"})["additionalModelRequestFields"]
    assert "display" not in fields["thinking"]


def test_other_models_get_no_thinking_fields_no_signatures_and_no_cache_points() -> None:
    model = _model("deepseek.r1-v1:0", name="DeepSeek-R1")
    assistant = AssistantMessage(
        content=[ThinkingContent(thinking="hmm", thinking_signature="sig"), TextContent(text="A.")],
        api=API,
        provider="amazon-bedrock",
        model=model.id,
        stop_reason="stop",
        timestamp=2,
    )
    messages = [UserMessage(content="q", timestamp=1), assistant, UserMessage(content="more", timestamp=3)]
    body = _body(model, "high", messages=messages)
    assert "additionalModelRequestFields" not in body
    assert body["inferenceConfig"] == {"maxTokens": 32_000}
    assert body["messages"][1]["content"][0] == {"reasoningContent": {"reasoningText": {"text": "hmm"}}}
    assert "cachePoint" not in json.dumps(body)
    forced = _body(model, env={"AWS_BEDROCK_FORCE_CACHE": "1"}, messages=messages)
    assert forced["system"][1] == {"cachePoint": {"type": "default"}}


def test_long_cache_retention_asks_for_an_hour() -> None:
    body = _body(_model("anthropic.claude-haiku-4-5-20251001-v1:0"), env={"PI_CACHE_RETENTION": "long"})
    point = {"cachePoint": {"type": "default", "ttl": "1h"}}
    assert body["system"][1] == point and body["messages"][-1]["content"][-1] == point


def test_images_go_as_format_and_bytes() -> None:
    image = ImageContent(data="aGk=", mime_type="image/jpeg")
    messages = [UserMessage(content=[TextContent(text="see"), image], timestamp=1)]
    model = _model("amazon.nova-pro-v1:0", input=["text", "image"])
    assert _body(model, messages=messages)["messages"][0]["content"] == [
        {"text": "see"},
        {"image": {"format": "jpeg", "source": {"bytes": "aGk="}}},
    ]


async def test_an_unsupported_image_type_fails_naming_the_types(server: ScriptedLLMServer) -> None:
    image = ImageContent(data="aGk=", mime_type="image/bmp")
    context = LlmContext(messages=[UserMessage(content=[image], timestamp=1)])
    model = catalog_model(server.url_for("bedrock", API))
    failed = await complete(model, context, StreamOptions(), asyncio.Event())
    assert "JPEG, PNG, GIF or WebP" in (failed.error_message or "")
