"""What the model is sent for the agent's own message roles."""

from __future__ import annotations

from tempi.agent.llm_conversion import to_llm_messages
from tempi.agent.messages import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ToolResultMessage,
    UserMessage,
)


def only_text(message: object) -> str:
    assert isinstance(message, UserMessage)
    assert isinstance(message.content, list) and len(message.content) == 1
    block = message.content[0]
    assert isinstance(block, TextContent)
    return block.text


def test_model_roles_pass_through_unchanged() -> None:
    user = UserMessage(content="hi", timestamp=1)
    assistant = AssistantMessage(
        content=[TextContent(text="yo")], api="faux", provider="faux", model="m", timestamp=2
    )
    result = ToolResultMessage(
        tool_call_id="c", tool_name="read", content=[TextContent(text="x")], timestamp=3
    )
    assert to_llm_messages([user, assistant, result]) == [user, assistant, result]


def test_user_bash_becomes_user_text_with_command_output_and_exit_code() -> None:
    bash = BashExecutionMessage(command="make test", output="2 failed\n", exit_code=2, timestamp=5)
    [message] = to_llm_messages([bash])
    text = only_text(message)
    assert "make test" in text and "2 failed" in text and "Exit code: 2" in text
    assert message.timestamp == 5


def test_user_bash_details_cancelled_no_output_truncated() -> None:
    cancelled = BashExecutionMessage(command="sleep 9", output="", cancelled=True, timestamp=1)
    text = only_text(to_llm_messages([cancelled])[0])
    assert "no output" in text and "cancelled" in text
    truncated = BashExecutionMessage(
        command="cat big",
        output="tail",
        exit_code=0,
        truncated=True,
        full_output_path="/tmp/full.log",
        timestamp=1,
    )
    assert "/tmp/full.log" in only_text(to_llm_messages([truncated])[0])


def test_bash_excluded_from_context_is_dropped() -> None:
    hidden = BashExecutionMessage(
        command="ls", output="a", exit_code=0, exclude_from_context=True, timestamp=1
    )
    assert to_llm_messages([hidden]) == []


def test_custom_message_becomes_user_content() -> None:
    as_string = CustomMessage(custom_type="ext", content="note", timestamp=4)
    assert only_text(to_llm_messages([as_string])[0]) == "note"
    blocks = [TextContent(text="see"), ImageContent(data="AAAA", mime_type="image/png")]
    [message] = to_llm_messages([CustomMessage(custom_type="ext", content=blocks, timestamp=4)])
    assert isinstance(message, UserMessage) and message.content == blocks


def test_summaries_say_what_they_are_and_wrap_the_summary() -> None:
    compaction = CompactionSummaryMessage(summary="## Goal\nship it", tokens_before=9000, timestamp=7)
    text = only_text(to_llm_messages([compaction])[0])
    assert "compacted" in text
    assert "<summary>\n## Goal\nship it\n</summary>" in text

    branch = BranchSummaryMessage(summary="tried plan A", from_id="abc", timestamp=8)
    text = only_text(to_llm_messages([branch])[0])
    assert "branch" in text
    assert "<summary>\ntried plan A\n</summary>" in text
