"""Compaction planning on hand-built branches: sizes, the threshold, the cut, split turns,
earlier compactions and file lists (the boundaries listed in pi-compat.md, "Compaction")."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tempi.agent.compaction import (
    IMAGE_TOKENS,
    context_tokens,
    estimate_tokens,
    newest_within,
    plan_branch_summary,
    plan_compaction,
    should_compact,
)
from tempi.agent.messages import (
    AssistantMessage,
    BashExecutionMessage,
    ImageContent,
    StopReason,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from tempi.agent.session_entries import SessionEntry, iso_timestamp, parse_entry
from tempi.agent.session_tree import SessionTree
from tempi.config.settings import CompactionSettings
from tests.fixture_paths import PI_FIXTURES


class Branch:
    """A branch built entry by entry; every helper appends a child of the last entry."""

    def __init__(self) -> None:
        self.entries: list[SessionEntry] = []
        self.clock = 0

    def add(self, entry_type: str, entry_id: str, **fields: Any) -> str:
        self.clock += 1
        parent = self.entries[-1].id if self.entries else None
        data = {
            "type": entry_type,
            "id": entry_id,
            "parentId": parent,
            "timestamp": iso_timestamp(1_767_225_600_000 + self.clock * 1000),
            **fields,
        }
        self.entries.append(parse_entry(data))
        return entry_id

    def message(self, entry_id: str, message: Any) -> str:
        return self.add("message", entry_id, message=message.to_json_dict())

    def user(self, entry_id: str, text: str) -> str:
        return self.message(entry_id, UserMessage(content=[TextContent(text=text)], timestamp=self.clock))

    def assistant(
        self,
        entry_id: str,
        text: str = "",
        calls: Sequence[tuple[str, str, dict[str, Any]]] = (),
        total_tokens: int = 0,
        stop_reason: StopReason = "stop",
    ) -> str:
        content: list[Any] = [TextContent(text=text)] if text else []
        content += [ToolCall(id=call_id, name=name, arguments=args) for call_id, name, args in calls]
        message = AssistantMessage(
            content=content,
            api="openai-completions",
            provider="mock",
            model="mock-model",
            usage=Usage(total_tokens=total_tokens),
            stop_reason="toolUse" if calls else stop_reason,
            timestamp=self.clock,
        )
        return self.message(entry_id, message)

    def result(self, entry_id: str, call_id: str, name: str, text: str) -> str:
        message = ToolResultMessage(
            tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)], timestamp=self.clock
        )
        return self.message(entry_id, message)

    def settings(self, entry_id: str) -> str:
        return self.add("thinking_level_change", entry_id, thinkingLevel="low")

    def compaction(
        self, entry_id: str, first_kept: str, summary: str = "old summary", details: Any = None, **extra: Any
    ) -> str:
        return self.add(
            "compaction",
            entry_id,
            summary=summary,
            firstKeptEntryId=first_kept,
            tokensBefore=999,
            details=details,
            **extra,
        )


def chars(tokens: int) -> str:
    """Text estimated at exactly `tokens` tokens."""
    return "x" * (tokens * 4)


def settings(keep: int = 100, reserve: int = 50) -> CompactionSettings:
    return CompactionSettings(keep_recent_tokens=keep, reserve_tokens=reserve)


def texts(messages: list[Any]) -> list[str]:
    out = []
    for message in messages:
        if isinstance(message, UserMessage | AssistantMessage | ToolResultMessage):
            out.append(message.text())
    return out


def fixture_path(name: str, leaf_id: str) -> list[SessionEntry]:
    lines = (PI_FIXTURES / "sessions" / name).read_text().splitlines()[1:]
    tree = SessionTree(parse_entry(json.loads(line)) for line in lines if line)
    return tree.path_to(leaf_id)


# --- sizes and the threshold -----------------------------------------------------------


def test_estimates_count_four_characters_a_token_and_an_image_as_1200() -> None:
    assert estimate_tokens(UserMessage(content="abcde", timestamp=0)) == 2
    picture = ImageContent(data="AAAA", mime_type="image/png")
    with_image = UserMessage(content=[TextContent(text="look"), picture], timestamp=0)
    assert estimate_tokens(with_image) == 1 + IMAGE_TOKENS
    result = ToolResultMessage(tool_call_id="c", tool_name="read", content=[picture], timestamp=0)
    assert estimate_tokens(result) == IMAGE_TOKENS
    call = AssistantMessage(
        content=[ToolCall(id="c", name="read", arguments={"path": "a.py"})],
        api="x",
        provider="p",
        model="m",
        timestamp=0,
    )
    assert estimate_tokens(call) == 5  # "read" + '{"path": "a.py"}' = 20 characters
    shell = BashExecutionMessage(command="ls", output="a\nb\n", timestamp=0)
    assert estimate_tokens(shell) == 2


def test_context_size_is_the_last_usage_plus_an_estimate_of_what_followed() -> None:
    branch = Branch()
    branch.user("u1", chars(10))
    branch.assistant("a1", "ok", calls=[("c1", "bash", {"command": "ls"})], total_tokens=500)
    branch.result("t1", "c1", "bash", chars(30))
    assert context_tokens(branch.entries) == 530


def test_failed_and_aborted_answers_do_not_anchor_the_size() -> None:
    branch = Branch()
    branch.user("u1", chars(10))
    branch.assistant("a1", "fine", total_tokens=400)
    branch.user("u2", chars(20))
    branch.assistant("a2", "", total_tokens=90_000, stop_reason="error")
    assert context_tokens(branch.entries) == 420


def test_usage_from_before_the_latest_compaction_is_stale() -> None:
    branch = Branch()
    branch.user("u1", chars(100))
    branch.assistant("a1", chars(100), total_tokens=50_000)
    branch.compaction("c1", first_kept="u1", summary=chars(20))
    branch.user("u2", chars(5))
    # The kept answer reported 50k tokens of a context that no longer exists: estimate all.
    assert context_tokens(branch.entries) == 20 + 100 + 100 + 5
    branch.assistant("a2", "done", total_tokens=300)
    assert context_tokens(branch.entries) == 300


def test_stale_usage_in_a_recorded_pi_session_is_ignored() -> None:
    # Third prompt after pi's manual compaction: every kept answer reported 120 tokens.
    path = fixture_path("rpc-steer-followup-compact.jsonl", "8d8b23f4")
    seen = SessionTree(path).build_context("8d8b23f4").messages
    assert context_tokens(path) == sum(estimate_tokens(m) for m in seen)
    assert context_tokens(path) != 120 + estimate_tokens(seen[-1])
    assert context_tokens(fixture_path("rpc-steer-followup-compact.jsonl", "7abc292d")) == 120


def test_compaction_triggers_only_past_the_reserved_room() -> None:
    limits = CompactionSettings(reserve_tokens=16_384)
    assert not should_compact(128_000 - 16_384, 128_000, limits)
    assert should_compact(128_000 - 16_384 + 1, 128_000, limits)
    assert not should_compact(200_000, 128_000, CompactionSettings(enabled=False))


# --- nothing to compact ----------------------------------------------------------------


def test_a_branch_of_settings_entries_has_nothing_to_compact() -> None:
    branch = Branch()
    branch.add("model_change", "m1", provider="mock", modelId="mock-model")
    branch.settings("s1")
    branch.add("session_info", "i1", name="x")
    assert plan_compaction(branch.entries, settings()) is None
    assert plan_compaction([], settings()) is None


def test_a_branch_that_ends_with_a_compaction_is_already_compacted() -> None:
    branch = Branch()
    branch.user("u1", chars(500))
    branch.assistant("a1", chars(500))
    branch.compaction("c1", first_kept="a1")
    assert plan_compaction(branch.entries, settings()) is None


def test_only_settings_entries_since_a_compaction_is_nothing_to_compact() -> None:
    branch = Branch()
    branch.user("u1", chars(500))
    branch.compaction("c1", first_kept="c1-missing")
    branch.settings("s1")
    assert plan_compaction(branch.entries, settings()) is None


# --- the cut ---------------------------------------------------------------------------


def test_cut_keeps_recent_messages_and_summarizes_the_rest() -> None:
    branch = Branch()
    for turn in range(4):
        branch.user(f"u{turn}", chars(40))
        branch.assistant(f"a{turn}", chars(40), total_tokens=100 * (turn + 1))
    plan = plan_compaction(branch.entries, settings(keep=150))
    assert plan is not None
    # From the newest: a3, u3 (80 tokens), a2 (120), u2 (160 >= 150): the kept part starts at u2.
    assert plan.first_kept_entry_id == "u2"
    assert not plan.is_split_turn
    assert len(plan.messages_to_summarize) == 4
    assert plan.turn_prefix_messages == []
    assert plan.previous_summary is None
    assert plan.tokens_before == 400
    assert plan.reserve_tokens == 50


def test_cut_landing_on_a_tool_result_moves_to_the_next_message_that_may_start() -> None:
    branch = Branch()
    branch.user("u1", "do it")
    branch.assistant("a1", calls=[("c1", "bash", {"command": "make"})])
    branch.result("t1", "c1", "bash", chars(200))
    branch.assistant("a2", "next", calls=[("c2", "bash", {"command": "ls"})])
    branch.result("t2", "c2", "bash", chars(10))
    branch.assistant("a3", "done")
    plan = plan_compaction(branch.entries, settings(keep=150))
    assert plan is not None
    # The budget is reached inside t1; the kept part may not begin with a tool result.
    assert plan.first_kept_entry_id == "a2"
    assert plan.is_split_turn
    assert [type(m).__name__ for m in plan.turn_prefix_messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]


def test_tool_results_at_the_end_stay_with_their_call() -> None:
    branch = Branch()
    branch.user("u1", chars(50))
    branch.assistant("a1", "earlier")
    branch.user("u2", "read both")
    branch.assistant("a2", calls=[("c1", "read", {"path": "a"}), ("c2", "read", {"path": "b"})])
    branch.result("t1", "c1", "read", chars(100))
    branch.result("t2", "c2", "read", chars(100))
    plan = plan_compaction(branch.entries, settings(keep=150))
    assert plan is not None
    # No message after the results may start the kept part, so it starts at their call.
    assert plan.first_kept_entry_id == "a2"
    assert plan.is_split_turn
    assert texts(plan.turn_prefix_messages) == ["read both"]
    assert texts(plan.messages_to_summarize) == [chars(50), "earlier"]


def test_a_cut_at_a_user_message_is_not_a_split_turn_and_keeps_the_settings_before_it() -> None:
    branch = Branch()
    branch.user("u1", chars(200))
    branch.assistant("a1", "first answer")
    branch.settings("s1")
    branch.user("u2", chars(200))
    branch.assistant("a2", "second answer")
    plan = plan_compaction(branch.entries, settings(keep=150))
    assert plan is not None
    assert plan.first_kept_entry_id == "s1"
    assert not plan.is_split_turn
    assert texts(plan.messages_to_summarize) == [chars(200), "first answer"]


def test_a_cut_inside_a_turn_summarizes_the_turn_prefix_separately() -> None:
    branch = Branch()
    branch.user("u0", "old question")
    branch.assistant("a0", "old answer")
    branch.user("u1", "refactor everything")
    for step in range(1, 4):
        branch.assistant(f"a{step}", calls=[(f"c{step}", "edit", {"path": f"f{step}.py"})])
        branch.result(f"t{step}", f"c{step}", "edit", chars(60))
    branch.assistant("a4", "all done")
    plan = plan_compaction(branch.entries, settings(keep=100))
    assert plan is not None
    assert plan.is_split_turn
    assert plan.first_kept_entry_id == "a3"
    assert texts(plan.messages_to_summarize) == ["old question", "old answer"]
    assert texts(plan.turn_prefix_messages)[0] == "refactor everything"
    assert len(plan.turn_prefix_messages) == 5  # u1, a1, t1, a2, t2
    # Files changed in the turn prefix are listed although the prefix has its own summary.
    assert plan.modified_files == ["f1.py", "f2.py"]


def test_a_small_branch_is_planned_whole_as_pi_did_on_overflow() -> None:
    # pi's overflow recording: everything fits keepRecentTokens, so nothing is summarized
    # and the kept part starts at the first entry; the size counts the last usage (120)
    # plus the tool result after it ("filler\n": 2 tokens).
    path = fixture_path("overflow.jsonl", "7d8b691e")
    plan = plan_compaction(path, CompactionSettings())
    assert plan is not None
    assert plan.first_kept_entry_id == "5335cb23"
    assert plan.messages_to_summarize == []
    assert not plan.is_split_turn
    assert plan.tokens_before == 122


def test_pi_manual_compaction_recording_has_the_same_plan() -> None:
    path = fixture_path("rpc-steer-followup-compact.jsonl", "9ff145d8")
    plan = plan_compaction(path, CompactionSettings())
    assert plan is not None
    assert plan.first_kept_entry_id == "a4be935e"
    assert plan.tokens_before == 129


# --- earlier compactions ---------------------------------------------------------------


def test_a_second_compaction_updates_the_previous_summary() -> None:
    branch = Branch()
    branch.user("u1", chars(100))
    branch.assistant("a1", chars(100))
    branch.user("u2", "kept question")
    branch.assistant("a2", "kept answer")
    branch.compaction("c1", first_kept="u2", summary="## Goal\nearlier work")
    branch.user("u3", chars(100))
    branch.assistant("a3", chars(100))
    branch.user("u4", chars(100))
    branch.assistant("a4", chars(100))
    plan = plan_compaction(branch.entries, settings(keep=150))
    assert plan is not None
    assert plan.previous_summary == "## Goal\nearlier work"
    assert plan.first_kept_entry_id == "u4"
    # Only what the previous compaction kept, and what came after it, is summarized now.
    assert texts(plan.messages_to_summarize) == ["kept question", "kept answer", chars(100), chars(100)]


def test_compaction_right_before_the_leaf() -> None:
    branch = Branch()
    branch.user("u1", chars(300))
    branch.assistant("a1", chars(300))
    branch.compaction("c1", first_kept="a1")
    branch.user("u2", "and now?")
    plan = plan_compaction(branch.entries, settings(keep=50))
    assert plan is not None
    assert plan.previous_summary == "old summary"
    # The new question alone is under the budget; the kept answer is the cut.
    assert plan.first_kept_entry_id == "a1"
    assert plan.messages_to_summarize == []
    assert not plan.is_split_turn


def test_file_lists_are_carried_forward_from_the_previous_compaction() -> None:
    branch = Branch()
    branch.user("u1", "x")
    branch.compaction(
        "c1", first_kept="u1", details={"readFiles": ["old.md", "a.py"], "modifiedFiles": ["m.py"]}
    )
    branch.assistant(
        "a1",
        calls=[
            ("c1", "read", {"path": "a.py"}),
            ("c2", "edit", {"path": "a.py", "edits": []}),
            ("c3", "write", {"path": "new.py", "content": ""}),
            ("c4", "read", {"path": "z.md"}),
            ("c5", "bash", {"command": "cat secret"}),
        ],
    )
    branch.result("t1", "c5", "bash", chars(10))
    branch.user("u2", chars(200))
    branch.assistant("a2", "done")
    plan = plan_compaction(branch.entries, settings(keep=150))
    assert plan is not None
    assert plan.first_kept_entry_id == "u2"
    assert plan.read_files == ["old.md", "z.md"]
    assert plan.modified_files == ["a.py", "m.py", "new.py"]


def test_file_lists_of_an_extension_written_compaction_are_not_trusted() -> None:
    branch = Branch()
    branch.user("u1", "x")
    branch.compaction("c1", first_kept="u1", details={"readFiles": ["ext.md"]}, fromHook=True)
    branch.user("u2", chars(200))
    branch.assistant("a2", "done")
    plan = plan_compaction(branch.entries, settings(keep=10))
    assert plan is not None
    assert plan.read_files == []


# --- branch summaries ------------------------------------------------------------------


def tree_with_two_branches() -> SessionTree:
    branch = Branch()
    branch.user("root", "start")
    branch.assistant("r1", "hello")
    branch.user("b1", "try approach one")
    branch.assistant("b2", calls=[("c1", "edit", {"path": "one.py"})])
    branch.result("b3", "c1", "edit", "edited")
    branch.assistant("b4", "approach one done")
    tree = SessionTree(branch.entries)
    other = parse_entry(
        {
            "type": "message",
            "id": "o1",
            "parentId": "r1",
            "timestamp": iso_timestamp(1_767_300_000_000),
            "message": {"role": "user", "content": "try approach two", "timestamp": 1},
        }
    )
    tree.append(other)
    return tree


def test_leaving_a_branch_plans_its_entries_after_the_common_ancestor() -> None:
    tree = tree_with_two_branches()
    plan = plan_branch_summary(tree, "b4", "o1")
    assert plan is not None
    assert plan.common_ancestor_id == "r1"
    assert plan.abandoned_entry_ids == ["b1", "b2", "b3", "b4"]
    # Tool results are left out: the call says what was done.
    assert [type(m).__name__ for m in plan.messages] == [
        "UserMessage",
        "AssistantMessage",
        "AssistantMessage",
    ]
    assert plan.modified_files == ["one.py"]


def test_moving_ahead_on_the_same_branch_abandons_nothing() -> None:
    tree = tree_with_two_branches()
    assert plan_branch_summary(tree, "r1", "b4") is None
    assert plan_branch_summary(tree, None, "b4") is None


def test_newest_within_keeps_the_most_recent_messages_that_fit() -> None:
    messages = [UserMessage(content=chars(10), timestamp=i) for i in range(5)]
    assert [m.timestamp for m in newest_within(messages, 25)] == [3, 4]
    assert len(newest_within(messages, 0)) == 5
