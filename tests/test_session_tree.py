"""The entry tree and the context a leaf sees (pi's buildSessionContext rules)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tempi.agent.messages import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    UserMessage,
)
from tempi.agent.session_entries import SessionEntry, iso_timestamp, parse_entry
from tempi.agent.session_tree import SessionTree, UnknownEntryError
from tests.fixture_paths import PI_FIXTURES

FIXTURES = PI_FIXTURES / "sessions"


def fixture_tree(name: str) -> tuple[SessionTree, list[dict[str, Any]]]:
    raw = [json.loads(line) for line in (FIXTURES / name).read_text().split("\n")[1:] if line]
    return SessionTree(parse_entry(d) for d in raw), raw


class Builder:
    """Small trees by hand: each helper appends a child of `parent` (default: the leaf)."""

    def __init__(self) -> None:
        self.tree = SessionTree()
        self.clock = 0

    def add(self, entry_type: str, entry_id: str, parent: str | None = "leaf", **fields: Any) -> SessionEntry:
        self.clock += 1
        parent_id = self.tree.leaf_id if parent == "leaf" else parent
        entry = parse_entry(
            {"type": entry_type, "id": entry_id, "parentId": parent_id,
             "timestamp": iso_timestamp(1767225600000 + self.clock * 1000), **fields}
        )  # fmt: skip
        self.tree.append(entry)
        return entry

    def user(self, entry_id: str, text: str, parent: str | None = "leaf") -> SessionEntry:
        return self.add(
            "message", entry_id, parent, message={"role": "user", "content": text, "timestamp": 1}
        )

    def assistant(self, entry_id: str, text: str, provider: str = "p", model: str = "m") -> SessionEntry:
        message = {
            "role": "assistant", "content": [{"type": "text", "text": text}], "api": "faux",
            "provider": provider, "model": model, "timestamp": 2,
        }  # fmt: skip
        return self.add("message", entry_id, message=message)


def texts(tree: SessionTree, leaf: str | None = None) -> list[str]:
    out = []
    for message in tree.build_context(leaf).messages:
        if isinstance(message, UserMessage | AssistantMessage):
            out.append(message.text())
        elif isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
            out.append(f"{message.role}:{message.summary}")
        else:
            out.append(message.role)
    return out


# --- fixtures --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["basic-openai.jsonl", "basic-anthropic.jsonl", "tools.jsonl"])
def test_fixture_without_compaction_gives_every_message_in_order(name: str) -> None:
    tree, raw = fixture_tree(name)
    context = tree.build_context()
    expected = [d["message"] for d in raw if d["type"] == "message"]
    assert [m.to_json_dict() for m in context.messages] == expected
    model_change = next(d for d in raw if d["type"] == "model_change")
    assert (context.provider, context.model_id) == (model_change["provider"], model_change["modelId"])
    assert context.thinking_level == "off"


def test_overflow_fixture_context_after_compaction() -> None:
    tree, raw = fixture_tree("overflow.jsonl")
    context = tree.build_context()
    compaction = next(d for d in raw if d["type"] == "compaction")
    first = context.messages[0]
    assert isinstance(first, CompactionSummaryMessage)
    assert first.summary == compaction["summary"]
    assert first.tokens_before == 122
    assert first.timestamp == 1795236711008  # the compaction entry's time
    # firstKeptEntryId is the very first entry, so every message before the compaction
    # is kept, then the one after it.
    before = [d["message"] for d in raw[: raw.index(compaction)] if d["type"] == "message"]
    after = [d["message"] for d in raw[raw.index(compaction) + 1 :] if d["type"] == "message"]
    assert [m.to_json_dict() for m in context.messages[1:]] == before + after
    assert [m.role for m in context.messages] == [
        "compactionSummary", "user", "assistant", "user", "assistant", "toolResult", "assistant", "assistant",
    ]  # fmt: skip
    assert (context.provider, context.model_id) == ("overflow", "mock-model")


def test_rpc_fixture_context_keeps_user_bash_and_name() -> None:
    tree, _ = fixture_tree("rpc-steer-followup-compact.jsonl")
    roles = [m.role for m in tree.build_context().messages]
    assert roles[0] == "compactionSummary"
    assert "bashExecution" in roles
    assert roles[-2:] == ["user", "assistant"]
    assert tree.session_name() == "rpc-capture"


# --- compaction rules ------------------------------------------------------------------


def test_compaction_drops_entries_before_first_kept() -> None:
    b = Builder()
    b.user("u1", "one")
    b.assistant("a1", "reply one")
    b.user("u2", "two")
    b.assistant("a2", "reply two")
    b.add("compaction", "c1", summary="S1", firstKeptEntryId="u2", tokensBefore=100)
    b.user("u3", "three")
    assert texts(b.tree) == ["compactionSummary:S1", "two", "reply two", "three"]


def test_latest_compaction_wins() -> None:
    b = Builder()
    b.user("u1", "one")
    b.add("compaction", "c1", summary="S1", firstKeptEntryId="u1", tokensBefore=10)
    b.user("u2", "two")
    b.assistant("a2", "reply two")
    b.add("compaction", "c2", summary="S2", firstKeptEntryId="a2", tokensBefore=20)
    b.user("u3", "three")
    assert texts(b.tree) == ["compactionSummary:S2", "reply two", "three"]


def test_compaction_with_unknown_first_kept_keeps_only_later_entries() -> None:
    b = Builder()
    b.user("u1", "one")
    b.add("compaction", "c1", summary="S", firstKeptEntryId="gone", tokensBefore=1)
    b.user("u2", "two")
    assert texts(b.tree) == ["compactionSummary:S", "two"]


# --- branching -------------------------------------------------------------------------


def test_two_branches_from_one_entry() -> None:
    b = Builder()
    b.user("u1", "start")
    b.assistant("a1", "answer")
    b.user("left", "left question")
    b.assistant("left-a", "left answer")
    b.user("right", "right question", parent="a1")
    b.assistant("right-a", "right answer")

    assert [e.id for e in b.tree.children("a1")] == ["left", "right"]
    assert [e.id for e in b.tree.children(None)] == ["u1"]
    assert b.tree.leaf_id == "right-a"
    assert texts(b.tree) == ["start", "answer", "right question", "right answer"]
    assert texts(b.tree, "left-a") == ["start", "answer", "left question", "left answer"]
    assert [e.id for e in b.tree.path_to("left-a")] == ["u1", "a1", "left", "left-a"]


def test_branch_summary_and_custom_message_enter_context_custom_and_label_do_not() -> None:
    b = Builder()
    b.user("u1", "start")
    b.add("branch_summary", "bs", fromId="old-leaf", summary="tried X, failed")
    b.add("custom", "state", customType="ext", data={"n": 1})
    b.add("label", "lbl", targetId="u1", label="checkpoint")
    b.add("custom_message", "cm", customType="ext", content="injected", display=False, details={"k": 1})
    b.add("session_info", "si", name="  my session ")
    messages = b.tree.build_context().messages
    assert [m.role for m in messages] == ["user", "branchSummary", "custom"]
    summary, custom = messages[1], messages[2]
    assert isinstance(summary, BranchSummaryMessage) and summary.from_id == "old-leaf"
    assert isinstance(custom, CustomMessage)
    assert (custom.custom_type, custom.content, custom.display, custom.details) == (
        "ext",
        "injected",
        False,
        {"k": 1},
    )
    assert custom.timestamp == 1767225605000  # the entry's time, in ms
    assert b.tree.labels() == {"u1": "checkpoint"}
    assert b.tree.session_name() == "my session"


def test_latest_model_and_thinking_level_on_the_path_win() -> None:
    b = Builder()
    b.add("model_change", "mc1", provider="anthropic", modelId="claude-sonnet-4-5")
    b.add("thinking_level_change", "t1", thinkingLevel="high")
    b.user("u1", "hi")
    b.assistant("a1", "hello", provider="anthropic", model="claude-sonnet-4-5")
    b.add("model_change", "mc2", provider="openai", modelId="gpt-5")
    b.add("thinking_level_change", "t2", thinkingLevel="low")
    b.user("u2", "other branch", parent="a1")

    on_main = b.tree.build_context("t2")
    assert (on_main.provider, on_main.model_id, on_main.thinking_level) == ("openai", "gpt-5", "low")
    on_branch = b.tree.build_context("u2")
    assert (on_branch.provider, on_branch.model_id, on_branch.thinking_level) == (
        "anthropic",
        "claude-sonnet-4-5",
        "high",
    )


def test_label_removal_and_empty_name_clear() -> None:
    b = Builder()
    b.user("u1", "x")
    b.add("label", "l1", targetId="u1", label="a")
    b.add("label", "l2", targetId="u1")
    b.add("session_info", "s1", name="named")
    b.add("session_info", "s2", name="")
    assert b.tree.labels() == {}
    assert b.tree.session_name() is None


# --- edges -----------------------------------------------------------------------------


def test_empty_tree_and_unknown_leaf() -> None:
    tree = SessionTree()
    assert tree.build_context().messages == []
    with pytest.raises(UnknownEntryError):
        tree.build_context("nope")


def test_duplicate_append_is_refused() -> None:
    b = Builder()
    b.user("u1", "x")
    with pytest.raises(ValueError, match="u1"):
        b.user("u1", "again")


def test_missing_parent_ends_the_path() -> None:
    b = Builder()
    b.user("u1", "lost root")
    b.user("u2", "orphan", parent="not-in-file")
    b.assistant("a2", "reply")
    assert texts(b.tree) == ["orphan", "reply"]


def test_deep_tree_builds_without_recursion() -> None:
    b = Builder()
    for i in range(10_000):
        b.user(f"u{i}", str(i))
    context = b.tree.build_context()
    assert len(context.messages) == 10_000
    assert texts(b.tree, "u4")[-1] == "4"


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.jsonl")))
def test_context_carried_on_turn_by_turn_equals_one_built_from_scratch(name: str) -> None:
    """A worker's tree grows with each turn and carries its last context on; a compaction,
    a model or thinking change, or a jump to another branch must give what a tree built
    from the whole file gives."""
    _, raw = fixture_tree(name)
    growing = SessionTree()
    leaves: list[str] = []
    for number, data in enumerate(raw):
        growing.append(parse_entry(data))
        leaves.append(data["id"])
        fresh = SessionTree(parse_entry(d) for d in raw[: number + 1])
        # The new leaf, then an earlier one (another branch), then the leaf again.
        for leaf in (data["id"], leaves[number // 2], data["id"]):
            assert growing.build_context(leaf) == fresh.build_context(leaf)


def test_a_compaction_appended_after_a_built_context_replaces_the_earlier_messages() -> None:
    b = Builder()
    b.user("u1", "first")
    b.assistant("a1", "one")
    b.user("u2", "second")
    assert texts(b.tree) == ["first", "one", "second"]
    b.add("compaction", "c1", summary="S", firstKeptEntryId="u2", tokensBefore=10)
    b.assistant("a2", "two")
    context = b.tree.build_context()
    assert isinstance(context.messages[0], CompactionSummaryMessage)
    assert texts(b.tree)[1:] == ["second", "two"]


def test_a_model_and_level_changed_after_a_built_context_are_in_force() -> None:
    b = Builder()
    b.user("u1", "hi")
    b.assistant("a1", "hello", provider="anthropic", model="claude-sonnet-4-5")
    before = b.tree.build_context()
    assert (before.provider, before.model_id, before.thinking_level) == (
        "anthropic",
        "claude-sonnet-4-5",
        "off",
    )
    b.add("model_change", "mc1", provider="openai", modelId="gpt-5")
    b.add("thinking_level_change", "t1", thinkingLevel="high")
    after = b.tree.build_context()
    assert (after.provider, after.model_id, after.thinking_level) == ("openai", "gpt-5", "high")
