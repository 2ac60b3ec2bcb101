"""A session's calls convert only their new messages, and send exactly what a conversion
from the start would send.

Random sessions grow turn by turn, with what makes repair and conversion stateful: tool
calls left without results, aborted and failed turns, results with images, thinking from
another model, duplicate tool-call ids, steering between a call and its results. Now and
then the session goes back to an earlier entry (a branch), switches model, or is reloaded
as equal but new objects. Each call's body, as dicts and as the bytes sent, must equal the
body built with no state kept.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tempi.activities.llm import StreamOptions, anthropic_messages, openai_completions, openai_responses
from tempi.activities.llm.conversation_cache import CONVERSATIONS, ConversationCache
from tempi.agent.llm_context import LlmContext, ToolSpec
from tempi.agent.messages import (
    AssistantBlock,
    AssistantMessage,
    ImageContent,
    LlmMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    parse_message,
)
from tempi.agent.model_spec import ModelSpec
from tests.test_llm_transform import assistant

MODELS = {
    "openai-completions": [
        ModelSpec(id="chat", api="openai-completions", provider="p", input=["text", "image"]),
        ModelSpec(id="chat-text", api="openai-completions", provider="p", input=["text"], reasoning=True),
    ],
    "openai-responses": [
        ModelSpec(
            id="resp", api="openai-responses", provider="openai", input=["text", "image"], reasoning=True
        ),
        ModelSpec(id="resp-2", api="openai-responses", provider="openai", input=["text"]),
    ],
    "anthropic-messages": [
        ModelSpec(id="claude", api="anthropic-messages", provider="anthropic", input=["text", "image"]),
        ModelSpec(id="claude-2", api="anthropic-messages", provider="anthropic", input=["text"]),
    ],
}
BUILDERS = {
    "openai-completions": (openai_completions.build_request, "messages"),
    "openai-responses": (openai_responses.build_request, "input"),
    "anthropic-messages": (anthropic_messages.build_request, "messages"),
}
TOOLS = [ToolSpec(name="read", description="Read a file.", parameters={"type": "object", "properties": {}})]
IMAGE = ImageContent(data="aGVsbG8=", mime_type="image/png")


class SessionGrower:
    """Appends random turns, the way a running session does."""

    def __init__(self, rng: random.Random, models: list[ModelSpec]) -> None:
        self.rng = rng
        self.models = models
        self.calls = 0

    def turn(self, model: ModelSpec) -> list[LlmMessage]:
        rng = self.rng
        author = model if rng.random() < 0.8 else rng.choice([*self.models, _other_model()])
        blocks: list[AssistantBlock] = []
        if rng.random() < 0.3:
            blocks.append(
                ThinkingContent(
                    thinking=rng.choice(["", "thinking it over"]),
                    thinking_signature=rng.choice([None, "sig", "reasoning_content"]),
                )
            )
        if rng.random() < 0.7:
            blocks.append(TextContent(text=rng.choice(["", "  ", "Let me look.", 'Ünïcode ✓ "quoted"'])))
        calls = []
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            self.calls += 1
            # Now and then an id another call already had, or one an API must rewrite.
            call_id = rng.choice([f"call_{self.calls}", f"call {self.calls}|item_{self.calls}", "call_1"])
            calls.append(ToolCall(id=call_id, name="read", arguments={"path": f"f{self.calls}.py"}))
        blocks.extend(calls)
        stop = rng.choice(["toolUse"] * 8 + ["stop", "aborted", "error"])
        messages: list[LlmMessage] = [
            AssistantMessage(
                content=blocks,
                api=author.api,
                provider=author.provider,
                model=author.id,
                stop_reason=stop,
                timestamp=2,
            )
        ]
        for tool_call in calls:
            roll = rng.random()
            if roll < 0.1:
                continue  # its result never arrived
            if roll < 0.15:
                messages.append(_user("Steering: also check the tests."))
            content: list[TextContent | ImageContent] = [TextContent(text=f"contents of {tool_call.id}")]
            if rng.random() < 0.15:
                content = [IMAGE] if rng.random() < 0.5 else [*content, IMAGE]
            messages.append(
                ToolResultMessage(tool_call_id=tool_call.id, tool_name="read", content=content, timestamp=3)
            )
        if rng.random() < 0.15:
            messages.append(_user(rng.choice(["Go on.", "", "   "])))
        return messages


def _other_model() -> ModelSpec:
    return ModelSpec(id="elsewhere", api="google-generative-ai", provider="google")


def _user(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=1)


def _reloaded(messages: list[LlmMessage]) -> list[LlmMessage]:
    """The same conversation as a fresh worker would parse it: equal, not identical."""
    return [parse_message(json.loads(json.dumps(m.to_json_dict()))) for m in messages]  # type: ignore[misc]


def _compact(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@pytest.mark.parametrize("api", sorted(MODELS))
@pytest.mark.parametrize("seed", range(6))
def test_each_call_sends_what_a_conversion_from_the_start_sends(api: str, seed: int) -> None:
    rng = random.Random(f"{api}-{seed}")
    build, field = BUILDERS[api]
    models = MODELS[api]
    grower = SessionGrower(rng, models)
    session_id = f"cache-test-{api}-{seed}"
    cached = StreamOptions(api_key="k", session_id=session_id)
    plain = StreamOptions(api_key="k")
    model = models[0]
    messages: list[LlmMessage] = [_user("Fix the bug.")]
    resumed_before = CONVERSATIONS.resumed
    for _ in range(120):
        roll = rng.random()
        if roll < 0.10 and len(messages) > 4:
            # Back to a recent entry, as /tree does: the next turn replaces what followed.
            messages = messages[: rng.randrange(max(1, len(messages) - 4), len(messages))]
        elif roll < 0.13:
            model = rng.choice(models)
        elif roll < 0.15:
            messages = _reloaded(messages)
        messages = [*messages, *grower.turn(model)]
        context = LlmContext(system_prompt="You are tempi.", messages=messages, tools=TOOLS)
        body = build(model, context, cached)
        expected = build(model, context, plain)
        assert body[field] == expected[field]
        if api != "anthropic-messages":
            assert CONVERSATIONS.encode((api, session_id), body, field) == _compact(body)
    # Most calls went on from the last one's state: the cache is what ran.
    assert CONVERSATIONS.resumed - resumed_before > 50


def test_a_conversation_built_twice_is_not_changed_by_the_second_build() -> None:
    """Anthropic's cache mark goes on the last user message; the messages kept for the next
    call must not carry it into the middle of the conversation."""
    model = MODELS["anthropic-messages"][0]
    options = StreamOptions(api_key="k", session_id="cache-mark")
    call = ToolCall(id="t1", name="read", arguments={})
    first: list[LlmMessage] = [
        _user("One."),
        assistant(call, model=model),
        ToolResultMessage(tool_call_id="t1", tool_name="read", content=[TextContent(text="x")], timestamp=3),
    ]
    anthropic_messages.build_request(model, LlmContext(messages=first), options)
    second = [
        *first,
        assistant(TextContent(text="Done."), model=model, stop_reason="stop"),
        _user("Two."),
    ]
    body = anthropic_messages.build_request(model, LlmContext(messages=second), options)
    marked = [i for i, m in enumerate(body["messages"]) if "cache_control" in json.dumps(m)]
    assert marked == [len(body["messages"]) - 1]


def test_going_back_to_an_earlier_turn_converts_the_new_branch() -> None:
    model = MODELS["openai-completions"][0]
    options = StreamOptions(api_key="k", session_id="cache-branch")

    def turn(name: str) -> list[LlmMessage]:
        call = ToolCall(id=f"call_{name}", name="read", arguments={"path": f"{name}.py"})
        return [
            assistant(call, model=model),
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name="read",
                content=[TextContent(text=f"{name} body")],
                timestamp=3,
            ),
        ]

    start: list[LlmMessage] = [_user("Read them all.")]
    main = [*start, *turn("a"), *turn("b"), *turn("c"), *turn("d")]
    openai_completions.build_request(model, LlmContext(messages=main), options)
    # /tree back to after "a", then three turns on the new branch: longer than the old one.
    branch = [*start, *turn("a"), *turn("x"), *turn("y"), *turn("z"), *turn("w")]
    body = openai_completions.build_request(model, LlmContext(messages=branch), options)
    sent = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    assert sent == ["call_a", "call_x", "call_y", "call_z", "call_w"]


def test_many_sessions_through_a_small_cache_send_the_same_bytes_within_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bound = 3_000
    cache = ConversationCache(max_sessions=8, max_encoded_bytes=bound)
    monkeypatch.setattr(openai_completions, "CONVERSATIONS", cache)
    model = MODELS["openai-completions"][0]
    rng = random.Random("small-cache")
    growers = [SessionGrower(rng, [model]) for _ in range(7)]
    conversations: list[list[LlmMessage]] = [[_user(f"Task {n}.")] for n in range(7)]
    dropped = False
    for _ in range(20):
        for n, grower in enumerate(growers):
            conversations[n] = [*conversations[n], *grower.turn(model)]
            context = LlmContext(system_prompt="You are tempi.", messages=conversations[n], tools=TOOLS)
            cached = StreamOptions(api_key="k", session_id=f"small-{n}")
            body = openai_completions.build_request(model, context, cached)
            expected = openai_completions.build_request(model, context, StreamOptions(api_key="k"))
            assert body["messages"] == expected["messages"]
            assert cache.encode(("openai-completions", f"small-{n}"), body, "messages") == _compact(body)
            kept = [c.encoded.size for c in cache._checkpoints.values() if c.encoded is not None]
            # The one just sent is kept whatever its size; the others make room for it.
            assert sum(kept) == cache._encoded_bytes
            assert sum(kept) <= bound or len(kept) == 1
            dropped = dropped or len(kept) < len(cache._checkpoints)
    assert dropped  # the bound was reached: some sessions' JSON went
    assert cache.resumed > 100  # while their conversions were still kept
