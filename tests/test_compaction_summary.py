"""Summary calls against the scripted LLM server: what the request carries, split turns,
failures, and compaction / branch-summary entries written once per id."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tempi.activities.compaction import (
    CompactionAborted,
    CompactionError,
    NothingToCompactError,
    compact_session,
    summarize,
    summarize_branch_session,
)
from tempi.activities.llm import StreamOptions
from tempi.agent.compaction import CompactionPlan
from tempi.agent.compaction_prompts import SUMMARY_SYSTEM_PROMPT
from tempi.agent.messages import (
    AssistantMessage,
    CompactionSummaryMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tempi.agent.model_spec import ModelSpec
from tempi.agent.session_entries import CompactionEntry
from tempi.config.settings import CompactionSettings
from tempi.store.session_store import SessionStore
from tempi.testing.scripted_llm import ScriptedLLMServer

SUMMARY = "## Goal\nShip the parser.\n\n## Progress\n### Done\n- [x] tokenizer"
SCENARIO = "compaction"
OPTIONS = StreamOptions(api_key="x")


def model_for(server: ScriptedLLMServer, scenario: str = SCENARIO, max_tokens: int = 16_384) -> ModelSpec:
    return ModelSpec(
        id="mock-model",
        api="openai-completions",
        provider="mock",
        base_url=server.url_for(scenario, "openai-completions"),
        context_window=32_000,
        max_tokens=max_tokens,
    )


@pytest.fixture
async def server() -> Any:
    async with ScriptedLLMServer(scenarios={SCENARIO: {"turns": [], "summary": SUMMARY}}) as running:
        yield running


def system_text(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=1)


def assistant(text: str = "", calls: list[ToolCall] | None = None) -> AssistantMessage:
    content: list[Any] = [TextContent(text=text)] if text else []
    return AssistantMessage(
        content=[*content, *(calls or [])], api="openai-completions", provider="mock", model="m", timestamp=2
    )


def plan(**fields: Any) -> CompactionPlan:
    defaults: dict[str, Any] = {
        "first_kept_entry_id": "keep1",
        "messages_to_summarize": [user("Please fix parser.py"), assistant("Looking at it.")],
        "tokens_before": 12_345,
        "reserve_tokens": 16_384,
    }
    return CompactionPlan(**{**defaults, **fields})


# --- the request -----------------------------------------------------------------------


async def test_first_summary_request_carries_prompt_conversation_and_output_budget(
    server: ScriptedLLMServer,
) -> None:
    outcome = await summarize(plan(), model_for(server), OPTIONS)

    [request] = server.requests_for(SCENARIO)
    assert request.kind == "summary"
    assert system_text(request.body) == SUMMARY_SYSTEM_PROMPT
    text = user_text(request.body)
    assert "<conversation>\n" in text and "\n</conversation>" in text
    conversation = text.split("<conversation>")[1].split("</conversation>")[0]
    assert "Please fix parser.py" in conversation and "Looking at it." in conversation
    for section in ("## Goal", "## Constraints & Preferences", "### In Progress", "## Critical Context"):
        assert section in text
    assert "<previous-summary>" not in text
    assert request.body["max_completion_tokens"] == 13_107  # 0.8 * 16384, as pi asks
    assert outcome.summary == SUMMARY
    assert outcome.first_kept_entry_id == "keep1"
    assert outcome.tokens_before == 12_345


async def test_update_request_carries_the_previous_summary_and_focus_text(server: ScriptedLLMServer) -> None:
    await summarize(
        plan(previous_summary="## Goal\nEarlier goal"),
        model_for(server),
        OPTIONS,
        custom_instructions="the database migration",
    )
    text = user_text(server.requests_for(SCENARIO)[0].body)
    assert "<previous-summary>\n## Goal\nEarlier goal\n</previous-summary>" in text
    assert text.index("</conversation>") < text.index("<previous-summary>")
    assert "the database migration" in text


async def test_output_budget_is_capped_by_the_model_limit(server: ScriptedLLMServer) -> None:
    await summarize(plan(), model_for(server, max_tokens=4_000), OPTIONS)
    assert server.requests_for(SCENARIO)[0].body["max_completion_tokens"] == 4_000


async def test_tool_calls_and_long_results_are_serialized_as_text(server: ScriptedLLMServer) -> None:
    call = ToolCall(id="c1", name="bash", arguments={"command": "pytest -q"})
    result = ToolResultMessage(
        tool_call_id="c1", tool_name="bash", content=[TextContent(text="E" * 5000)], timestamp=3
    )
    await summarize(
        plan(messages_to_summarize=[user("run tests"), assistant(calls=[call]), result]),
        model_for(server),
        OPTIONS,
    )
    text = user_text(server.requests_for(SCENARIO)[0].body)
    assert 'bash(command="pytest -q")' in text
    assert "E" * 2000 in text and "E" * 2001 not in text
    assert "3000 more characters" in text
    # Sent as one text message: the model must not see a conversation to continue.
    assert [m["role"] for m in server.requests_for(SCENARIO)[0].body["messages"]] == ["system", "user"]


async def test_file_lists_are_appended_to_the_summary(server: ScriptedLLMServer) -> None:
    outcome = await summarize(
        plan(read_files=["a.md"], modified_files=["b.py", "c.py"]), model_for(server), OPTIONS
    )
    assert (
        outcome.summary
        == f"{SUMMARY}\n\n<read-files>\na.md\n</read-files>\n\n<modified-files>\nb.py\nc.py\n</modified-files>"
    )
    assert outcome.details.to_json_dict() == {"readFiles": ["a.md"], "modifiedFiles": ["b.py", "c.py"]}


async def test_a_split_turn_summarizes_the_turn_prefix_in_a_second_call(server: ScriptedLLMServer) -> None:
    split = plan(
        is_split_turn=True,
        turn_prefix_messages=[user("Rewrite the lexer"), assistant("Step one done")],
    )
    outcome = await summarize(split, model_for(server), OPTIONS)

    requests = server.requests_for(SCENARIO)
    assert len(requests) == 2
    texts = [user_text(r.body) for r in requests]
    history = next(t for t in texts if "Please fix parser.py" in t)
    prefix = next(t for t in texts if "Rewrite the lexer" in t)
    assert "Rewrite the lexer" not in history
    assert "Please fix parser.py" not in prefix
    budgets = sorted(r.body["max_completion_tokens"] for r in requests)
    assert budgets == [8_192, 13_107]
    # Both summaries end up in the one entry, history first.
    assert outcome.summary.count(SUMMARY) == 2
    assert "---" in outcome.summary


async def test_a_split_turn_with_no_earlier_messages_keeps_the_previous_summary(
    server: ScriptedLLMServer,
) -> None:
    split = plan(
        messages_to_summarize=[],
        previous_summary="## Goal\nEarlier goal",
        is_split_turn=True,
        turn_prefix_messages=[user("Rewrite the lexer")],
    )
    outcome = await summarize(split, model_for(server), OPTIONS)
    assert len(server.requests_for(SCENARIO)) == 1
    assert outcome.summary.startswith("## Goal\nEarlier goal")


@pytest.mark.parametrize("split", [False, True])
async def test_a_failed_summary_call_raises_with_the_providers_message(
    server: ScriptedLLMServer, split: bool
) -> None:
    failing = plan(is_split_turn=True, turn_prefix_messages=[user("go")]) if split else plan()
    with pytest.raises(CompactionError) as caught:
        await summarize(failing, model_for(server, scenario="no-such-scenario"), OPTIONS)
    assert caught.value.provider_message is not None
    assert "unknown scenario" in caught.value.provider_message
    assert "unknown scenario" in str(caught.value)


async def test_an_aborted_summary_says_so(server: ScriptedLLMServer) -> None:
    abort = asyncio.Event()
    abort.set()
    with pytest.raises(CompactionAborted):
        await summarize(plan(), model_for(server), OPTIONS, abort=abort)


async def test_a_summary_without_credentials_fails_clearly(server: ScriptedLLMServer) -> None:
    with pytest.raises(CompactionError, match="No API key"):
        await summarize(plan(), model_for(server), StreamOptions())


# --- compacting a stored session -------------------------------------------------------


def write_session(store: SessionStore, tmp_path: Path, turns: int) -> tuple[Path, str]:
    path = tmp_path / "session.jsonl"
    store.create(path, {"type": "session", "id": "s-1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"})
    entries: list[dict[str, Any]] = []
    parent: str | None = None
    for turn in range(turns):
        for kind, message in (
            ("u", user(f"question {turn} " + "q" * 400)),
            (
                "a",
                assistant(
                    f"answer {turn} " + "a" * 400,
                    [ToolCall(id=f"c{turn}", name="read", arguments={"path": f"f{turn}.py"})],
                ),
            ),
            (
                "t",
                ToolResultMessage(
                    tool_call_id=f"c{turn}",
                    tool_name="read",
                    content=[TextContent(text="r" * 400)],
                    timestamp=3,
                ),
            ),
        ):
            entry_id = f"{kind}{turn}"
            entries.append(
                {
                    "type": "message",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": "2026-01-01T00:00:01.000Z",
                    "message": message.to_json_dict(),
                }
            )
            parent = entry_id
    store.append(path, entries)
    assert parent is not None
    return path, parent


async def test_compact_session_appends_one_entry_and_the_next_context_uses_it(
    server: ScriptedLLMServer, tmp_path: Path
) -> None:
    store = SessionStore(tmp_path)
    path, leaf = write_session(store, tmp_path, turns=6)
    # A turn is about 311 tokens: keeping 600 keeps the last two turns whole.
    limits = CompactionSettings(keep_recent_tokens=600)

    outcome = await compact_session(
        store, path, leaf, model_for(server), OPTIONS, limits, "focus on reads", "cmp00001",
        "2026-01-01T00:00:09.000Z", "threshold",
    )  # fmt: skip
    assert outcome is not None
    assert outcome.first_kept_entry_id == "u4"
    assert outcome.details.read_files == ["f0.py", "f1.py", "f2.py", "f3.py"]

    session = store.load(path)
    entry = session.tree.get("cmp00001")
    assert entry is not None and entry.parent_id == leaf
    assert entry.to_json_dict()["details"] == {
        "readFiles": ["f0.py", "f1.py", "f2.py", "f3.py"],
        "modifiedFiles": [],
    }
    context = session.tree.build_context().messages
    assert isinstance(context[0], CompactionSummaryMessage)
    assert context[0].summary == outcome.summary
    assert isinstance(context[1], UserMessage) and context[1].text().startswith("question 4")
    assert len(context) == 1 + 6  # the summary, then turns 4 and 5


async def test_compact_session_retried_with_the_same_id_does_not_call_the_model_again(
    server: ScriptedLLMServer, tmp_path: Path
) -> None:
    store = SessionStore(tmp_path)
    path, leaf = write_session(store, tmp_path, turns=4)
    limits = CompactionSettings(keep_recent_tokens=250)
    args = (
        store,
        path,
        leaf,
        model_for(server),
        OPTIONS,
        limits,
        None,
        "cmp00001",
        "2026-01-01T00:00:09.000Z",
    )

    first = await compact_session(*args, "threshold")
    again = await compact_session(*args, "threshold")
    # A fresh store reads the file: a dead worker's successor sees the same.
    from_file = await compact_session(SessionStore(tmp_path), *args[1:], "threshold")

    assert len(server.requests_for(SCENARIO)) == 1
    assert first == again == from_file
    assert sum(1 for line in path.read_text().splitlines() if '"cmp00001"' in line) == 1


async def test_compact_session_with_nothing_to_compact(server: ScriptedLLMServer, tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    path = tmp_path / "session.jsonl"
    store.create(path, {"type": "session", "id": "s-2", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"})
    store.append(
        path, [{"type": "model_change", "id": "m1", "parentId": None, "provider": "mock", "modelId": "m"}]
    )
    args = (store, path, "m1", model_for(server), OPTIONS, CompactionSettings(), None, "cmp00001", "t")

    assert await compact_session(*args, "threshold") is None
    with pytest.raises(NothingToCompactError, match="Nothing to compact"):
        await compact_session(*args, "manual")
    assert server.requests_for(SCENARIO) == []
    assert store.load(path).tree.get("cmp00001") is None


async def test_compact_session_rejects_an_unknown_leaf(server: ScriptedLLMServer, tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    path, _ = write_session(store, tmp_path, turns=1)
    with pytest.raises(CompactionError, match="not in this session"):
        await compact_session(
            store, path, "nope", model_for(server), OPTIONS, CompactionSettings(), None, "c1", "t", "manual"
        )


async def test_a_failed_compaction_writes_nothing(server: ScriptedLLMServer, tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    path, leaf = write_session(store, tmp_path, turns=4)
    with pytest.raises(CompactionError):
        await compact_session(
            store, path, leaf, model_for(server, scenario="missing"), OPTIONS,
            CompactionSettings(keep_recent_tokens=250), None, "cmp00001", "t", "overflow",
        )  # fmt: skip
    assert store.load(path).tree.get("cmp00001") is None


async def test_a_second_compaction_sends_the_first_summary_for_updating(
    server: ScriptedLLMServer, tmp_path: Path
) -> None:
    store = SessionStore(tmp_path)
    path, leaf = write_session(store, tmp_path, turns=4)
    limits = CompactionSettings(keep_recent_tokens=600)
    model = model_for(server)
    await compact_session(store, path, leaf, model, OPTIONS, limits, None, "cmp00001", "t", "threshold")
    more = [
        {"type": "message", "id": "u9", "parentId": "cmp00001", "message": user("x" * 2000).to_json_dict()},
        {"type": "message", "id": "a9", "parentId": "u9", "message": assistant("y" * 2000).to_json_dict()},
    ]
    store.append(path, more)
    second = await compact_session(
        store, path, "a9", model, OPTIONS, limits, None, "cmp00002", "t", "threshold"
    )
    assert second is not None
    first_summary = store.load(path).tree.get("cmp00001")
    assert isinstance(first_summary, CompactionEntry)
    text = user_text(server.requests_for(SCENARIO)[1].body)
    assert f"<previous-summary>\n{first_summary.summary}\n</previous-summary>" in text
    # Turns 0-1 went into the first summary; only what it kept is sent again.
    assert "question 2" in text and "question 0" not in text
    # The first compaction's read files are carried into the second one's lists.
    assert second.details.read_files == ["f0.py", "f1.py", "f2.py", "f3.py"]


# --- branch summaries ------------------------------------------------------------------


async def test_leaving_a_branch_writes_one_branch_summary(server: ScriptedLLMServer, tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    path, leaf = write_session(store, tmp_path, turns=3)
    args = (store, path, leaf, "u1", "a0", model_for(server), OPTIONS, "bs000001", "2026-01-01T00:00:09.000Z")

    entry = await summarize_branch_session(*args, custom_instructions="what failed")
    again = await summarize_branch_session(*args)

    assert entry is not None and again == entry
    assert len(server.requests_for(SCENARIO)) == 1
    text = user_text(server.requests_for(SCENARIO)[0].body)
    # The user re-edits question 1: everything after it is left behind, not what leads to it.
    assert "answer 1" in text and "question 2" in text
    assert "question 1" not in text and "question 0" not in text
    assert "what failed" in text
    assert server.requests_for(SCENARIO)[0].body["max_completion_tokens"] == 2048
    stored = store.load(path).tree.get("bs000001")
    assert stored is not None
    assert stored.to_json_dict() == entry.to_json_dict()
    assert entry.parent_id == "a0" and entry.from_id == "a0"
    assert entry.summary.startswith(SUMMARY)
    assert entry.details == {"readFiles": ["f1.py", "f2.py"], "modifiedFiles": []}
    assert entry.summary.endswith("<read-files>\nf1.py\nf2.py\n</read-files>")


async def test_moving_within_one_branch_has_no_branch_summary(
    server: ScriptedLLMServer, tmp_path: Path
) -> None:
    store = SessionStore(tmp_path)
    path, _ = write_session(store, tmp_path, turns=2)
    result = await summarize_branch_session(
        store, path, "a0", "t1", "t1", model_for(server), OPTIONS, "bs000001", "t"
    )
    assert result is None
    assert server.requests_for(SCENARIO) == []


def test_plans_and_outcomes_survive_a_json_round_trip() -> None:
    # Both cross the activity boundary as JSON.
    split = plan(is_split_turn=True, turn_prefix_messages=[user("go")], read_files=["a"])
    assert CompactionPlan.model_validate_json(split.to_json()) == split
