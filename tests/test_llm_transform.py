"""Conversation repair: what a stored conversation becomes before it is sent to a model."""

from __future__ import annotations

import re

from tempi.activities.llm.transform import (
    ANTHROPIC_TOOL_IDS,
    IMAGE_OMITTED_TEXT,
    MISSING_RESULT_TEXT,
    OPENAI_CHAT_TOOL_IDS,
    OPENAI_RESPONSES_TOOL_IDS,
    repair_conversation,
)
from tempi.agent.messages import (
    AssistantBlock,
    AssistantMessage,
    ImageContent,
    LlmMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tempi.agent.model_spec import ModelSpec

CLAUDE = ModelSpec(id="claude-x", api="anthropic-messages", provider="anthropic", input=["text", "image"])
GPT = ModelSpec(id="gpt-x", api="openai-responses", provider="openai", input=["text", "image"])
TEXT_ONLY = ModelSpec(id="local", api="openai-completions", provider="local", input=["text"])


def user(text: str = "hi") -> UserMessage:
    return UserMessage(content=text, timestamp=1)


def assistant(
    *blocks: AssistantBlock, model: ModelSpec = CLAUDE, stop_reason: StopReason = "toolUse"
) -> AssistantMessage:
    return AssistantMessage(
        content=list(blocks),
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason=stop_reason,
        timestamp=2,
    )


def result(call_id: str, text: str = "ok", name: str = "read") -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)], timestamp=3
    )


def call(call_id: str, name: str = "read") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments={"path": "a.py"})


def roles(messages: list[LlmMessage]) -> list[str]:
    return [message.role for message in messages]


def test_orphaned_tool_call_before_next_user_message_gets_an_error_result() -> None:
    repaired = repair_conversation(
        [user(), assistant(call("a"), call("b")), result("a"), user("go on")], CLAUDE, ANTHROPIC_TOOL_IDS
    )
    assert roles(repaired) == ["user", "assistant", "toolResult", "toolResult", "user"]
    synthetic = repaired[3]
    assert isinstance(synthetic, ToolResultMessage)
    assert (synthetic.tool_call_id, synthetic.tool_name, synthetic.is_error) == ("b", "read", True)
    assert synthetic.text() == MISSING_RESULT_TEXT


def test_tool_calls_left_open_at_the_end_are_answered() -> None:
    repaired = repair_conversation([user(), assistant(call("a"))], CLAUDE, ANTHROPIC_TOOL_IDS)
    assert roles(repaired) == ["user", "assistant", "toolResult"]
    assert isinstance(repaired[2], ToolResultMessage) and repaired[2].is_error


def test_failed_and_aborted_turns_are_left_out_with_their_dangling_results() -> None:
    messages: list[LlmMessage] = [
        user(),
        assistant(TextContent(text="half an ans"), call("x"), stop_reason="aborted"),
        result("x"),
        assistant(TextContent(text="boom"), stop_reason="error"),
        user("again"),
    ]
    repaired = repair_conversation(messages, CLAUDE, ANTHROPIC_TOOL_IDS)
    assert roles(repaired) == ["user", "user"]


def test_a_result_for_an_unknown_call_is_dropped_and_duplicates_are_kept_once() -> None:
    messages: list[LlmMessage] = [
        user(),
        assistant(call("a")),
        result("a"),
        result("a", "again"),
        result("zzz"),
    ]
    repaired = repair_conversation(messages, CLAUDE, ANTHROPIC_TOOL_IDS)
    assert roles(repaired) == ["user", "assistant", "toolResult"]


def test_anthropic_ids_are_sanitised_and_results_follow_their_call() -> None:
    long_id = "call_abc|" + "fc_" + "x" * 300
    messages: list[LlmMessage] = [user(), assistant(call(long_id), model=GPT), result(long_id)]
    repaired = repair_conversation(messages, CLAUDE, ANTHROPIC_TOOL_IDS)
    tool_call = repaired[1]
    assert isinstance(tool_call, AssistantMessage)
    new_id = tool_call.tool_calls()[0].id
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", new_id)
    assert isinstance(repaired[2], ToolResultMessage) and repaired[2].tool_call_id == new_id


def test_openai_chat_ids_are_cut_to_forty_characters_without_collisions() -> None:
    first = "toolu_" + "a" * 50 + "1"
    second = "toolu_" + "a" * 50 + "2"
    messages: list[LlmMessage] = [user(), assistant(call(first), call(second)), result(first), result(second)]
    repaired = repair_conversation(messages, TEXT_ONLY, OPENAI_CHAT_TOOL_IDS)
    calls = repaired[1]
    assert isinstance(calls, AssistantMessage)
    ids = [c.id for c in calls.tool_calls()]
    assert all(len(i) <= 40 for i in ids)
    assert len(set(ids)) == 2
    assert [m.tool_call_id for m in repaired[2:] if isinstance(m, ToolResultMessage)] == ids


def test_responses_ids_survive_for_the_same_model_only() -> None:
    own = "call_1|fc_abc"
    same = repair_conversation(
        [user(), assistant(call(own), model=GPT), result(own)], GPT, OPENAI_RESPONSES_TOOL_IDS
    )
    other_model = GPT.model_copy(update={"id": "gpt-y"})
    crossed = repair_conversation(
        [user(), assistant(call(own), model=GPT), result(own)], other_model, OPENAI_RESPONSES_TOOL_IDS
    )
    assert isinstance(same[1], AssistantMessage) and same[1].tool_calls()[0].id == own
    assert isinstance(crossed[1], AssistantMessage) and crossed[1].tool_calls()[0].id == "call_1"
    assert isinstance(crossed[2], ToolResultMessage) and crossed[2].tool_call_id == "call_1"


def test_thinking_from_another_model_becomes_text_and_same_model_keeps_signatures() -> None:
    thought = ThinkingContent(thinking="consider", thinking_signature="sig")
    redacted = ThinkingContent(thinking="[redacted]", thinking_signature="opaque", redacted=True)
    history: list[LlmMessage] = [
        user(),
        assistant(thought, redacted, TextContent(text="answer"), stop_reason="stop"),
    ]

    same = repair_conversation(history, CLAUDE, ANTHROPIC_TOOL_IDS)[1]
    assert isinstance(same, AssistantMessage)
    assert same.content == [thought, redacted, TextContent(text="answer")]

    other = repair_conversation(history, GPT, OPENAI_RESPONSES_TOOL_IDS)[1]
    assert isinstance(other, AssistantMessage)
    assert other.content == [TextContent(text="consider"), TextContent(text="answer")]


def test_text_signatures_and_thought_signatures_do_not_cross_models() -> None:
    history: list[LlmMessage] = [
        user(),
        assistant(
            TextContent(text="a", text_signature="msg_1"),
            ToolCall(id="c", name="read", thought_signature="t"),
            model=GPT,
        ),
        result("c"),
    ]
    repaired = repair_conversation(history, CLAUDE, ANTHROPIC_TOOL_IDS)[1]
    assert isinstance(repaired, AssistantMessage)
    text, tool_call = repaired.content
    assert isinstance(text, TextContent) and text.text_signature is None
    assert isinstance(tool_call, ToolCall) and tool_call.thought_signature is None


def test_empty_text_blocks_and_empty_messages_are_removed() -> None:
    history: list[LlmMessage] = [
        UserMessage(content=[TextContent(text="  "), TextContent(text="real")], timestamp=1),
        UserMessage(content="   ", timestamp=1),
        assistant(TextContent(text=""), ThinkingContent(thinking=" "), stop_reason="stop", model=GPT),
        assistant(TextContent(text=" "), TextContent(text="kept"), stop_reason="stop"),
    ]
    repaired = repair_conversation(history, CLAUDE, ANTHROPIC_TOOL_IDS)
    assert roles(repaired) == ["user", "assistant"]
    first, second = repaired
    assert isinstance(first, UserMessage) and first.content == [TextContent(text="real")]
    assert isinstance(second, AssistantMessage) and second.content == [TextContent(text="kept")]


def test_images_become_a_placeholder_for_text_only_models() -> None:
    image = ImageContent(data="aGk=", mime_type="image/png")
    history: list[LlmMessage] = [
        UserMessage(content=[TextContent(text="look"), image], timestamp=1),
        assistant(call("a"), model=TEXT_ONLY),
        ToolResultMessage(tool_call_id="a", tool_name="read", content=[image], timestamp=3),
    ]
    text_only = repair_conversation(history, TEXT_ONLY, OPENAI_CHAT_TOOL_IDS)
    first = text_only[0]
    assert isinstance(first, UserMessage)
    assert first.content == [TextContent(text="look"), TextContent(text=IMAGE_OMITTED_TEXT)]
    assert isinstance(text_only[2], ToolResultMessage) and text_only[2].text() == IMAGE_OMITTED_TEXT

    with_images = repair_conversation(history, CLAUDE, ANTHROPIC_TOOL_IDS)
    assert isinstance(with_images[0], UserMessage) and with_images[0].content[1] == image


def test_repair_leaves_the_input_untouched() -> None:
    history: list[LlmMessage] = [user(), assistant(call("a|b")), result("a|b")]
    before = [m.model_dump() for m in history]
    repair_conversation(history, TEXT_ONLY, OPENAI_CHAT_TOOL_IDS)
    assert [m.model_dump() for m in history] == before
