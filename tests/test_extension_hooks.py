"""The extension loader and hook runner as plain functions: what an extension author sees
when a module changes, a handler misbehaves, or two extensions touch one result."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tempi.activities.compaction import CompactionCancelled, compact_session
from tempi.activities.extension_activities import ExtensionActivities
from tempi.agent.llm_context import LlmContext
from tempi.agent.llm_conversion import to_llm_messages
from tempi.agent.messages import TextContent
from tempi.config.settings import CompactionSettings
from tempi.extensions.api import CommandContext, ExtensionContext
from tempi.extensions.commands import find_command, run_command
from tempi.extensions.compaction_hook import BeforeCompactHooks
from tempi.extensions.hooks import (
    BeforeAgentStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    run_before_agent_start,
    run_tool_call,
    run_tool_result,
)
from tempi.extensions.loader import ExtensionLoadError, load_all, load_extension
from tempi.extensions.run_events import turn_hooks
from tempi.extensions.user_input import InputEvent, run_input
from tempi.store.session_store import SessionStore
from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workflows.activity_payloads import AgentEndInput, SessionFileRef
from tests.test_compaction_summary import OPTIONS, SCENARIO, model_for, server, write_session

__all__ = ["server"]  # the scripted model server fixture, shared with the compaction tests

CTX = ExtensionContext(cwd="/work", session_id="s", session_file="/nowhere.jsonl")


def _write(path: Path, body: str) -> str:
    path.write_text(body)
    return str(path)


def test_a_changed_module_is_loaded_again_and_an_unchanged_one_is_not(tmp_path: Path) -> None:
    path = _write(tmp_path / "ext.py", "def extension(tempi):\n    tempi.register_command('one')\n")
    first = load_extension(path)
    assert load_extension(path) is first
    _write(tmp_path / "ext.py", "def extension(tempi):\n    tempi.register_command('two')\n")
    os.utime(path, ns=(0, os.stat(path).st_mtime_ns + 1_000_000))
    assert list(load_extension(path).commands) == ["two"]


def test_load_problems_say_what_to_fix(tmp_path: Path) -> None:
    no_factory = _write(tmp_path / "a.py", "x = 1\n")
    typo = _write(tmp_path / "b.py", "def extension(tempi):\n    tempi.on('tool_cal', print)\n")
    bad_effect = _write(
        tmp_path / "c.py",
        "def extension(tempi):\n    tempi.register_tool('t', 'd', {}, print, effect='reads')\n",
    )
    loaded, problems = load_all([no_factory, typo, bad_effect, str(tmp_path / "gone.py")])
    assert loaded == []
    errors = [p.error for p in problems]
    assert "has no `def extension(tempi): ...` function" in errors[0]
    assert "tempi has no event 'tool_cal'" in errors[1] and "b.py:2" in errors[1]
    assert "effect 'reads' is not one of read, write, execute, idempotent" in errors[2]
    assert "does not exist on this machine" in errors[3]
    with pytest.raises(ExtensionLoadError):
        load_extension(no_factory)


async def test_tool_call_hooks_fail_closed_and_may_replace_the_input(tmp_path: Path) -> None:
    rewrite = load_extension(
        _write(
            tmp_path / "rewrite.py",
            "def extension(tempi):\n    tempi.on('tool_call', lambda e, ctx: {'input': {'command': 'ls'}})\n",
        )
    )
    broken = load_extension(
        _write(
            tmp_path / "broken.py", "def extension(tempi):\n    tempi.on('tool_call', lambda e, ctx: 1 / 0)\n"
        )
    )
    decision = await run_tool_call([rewrite], ToolCallEvent("bash", "c1", {"command": "rm x"}), CTX)
    assert decision.blocked is None and decision.input == {"command": "ls"}
    decision = await run_tool_call([rewrite, broken], ToolCallEvent("bash", "c1", {"command": "rm x"}), CTX)
    assert decision.blocked is not None and "ZeroDivisionError" in decision.blocked


async def test_tool_result_hooks_run_in_extension_order_and_a_failing_one_is_skipped(tmp_path: Path) -> None:
    def ext(name: str, body: str) -> str:
        return _write(
            tmp_path / f"{name}.py", f"def extension(tempi):\n    tempi.on('tool_result', {body})\n"
        )

    loaded, _ = load_all(
        [
            ext("first", "lambda e, ctx: {'content': e.content[0]['text'] + ' one'}"),
            ext("fails", "lambda e, ctx: [][1]"),
            ext("second", "lambda e, ctx: {'content': e.content[0]['text'] + ' two', 'isError': True}"),
        ]
    )
    event = ToolResultEvent("read", "c1", {}, [{"type": "text", "text": "zero"}], None, False)
    change = await run_tool_result(loaded, event, CTX)
    assert change.content == [{"type": "text", "text": "zero one two"}] and change.is_error
    assert len(change.problems) == 1 and "IndexError" in change.problems[0].error


def test_append_entry_outside_a_handler_says_where_it_works(tmp_path: Path) -> None:
    path = _write(tmp_path / "early.py", "def extension(tempi):\n    tempi.append_entry('x', 1)\n")
    _, problems = load_all([path])
    assert "append_entry works inside an event handler or a tool's execute" in problems[0].error


async def test_before_agent_start_messages_are_collected_and_a_malformed_one_is_reported(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path / "inject.py",
        "def extension(tempi):\n"
        "    tempi.on('before_agent_start', lambda e, ctx: {'message': 'plain text'})\n"
        "    tempi.on('before_agent_start', lambda e, ctx: {'message': {'details': 1}})\n"
        "    tempi.on('before_agent_start', lambda e, ctx: {'message': {'customType': 'note',"
        " 'content': [{'type': 'text', 'text': e.prompt}], 'display': False}, 'systemPrompt': 'S2'})\n",
    )
    change = await run_before_agent_start(load_all([path])[0], BeforeAgentStartEvent("hi", "S1"), CTX)
    assert change.system_prompt == "S2"
    assert [(m.custom_type, m.content, m.display) for m in change.messages] == [
        ("inject", "plain text", True),
        ("note", [TextContent(text="hi")], False),
    ]
    assert len(change.problems) == 1 and "has no content" in change.problems[0].error


async def test_input_handlers_transform_in_order_stop_at_handled_and_report_failures(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "typing.py",
        "def extension(tempi):\n"
        "    tempi.on('input', lambda e, ctx: {'action': 'transform', 'text': e.text + ' one'})\n"
        "    tempi.on('input', lambda e, ctx: {'action': 'shout'})\n"
        "    tempi.on('input', lambda e, ctx: {'action': 'handled'} if 'stop' in e.text else None)\n"
        "    tempi.on('input', lambda e, ctx: {'action': 'transform', 'text': e.text + ' two'})\n",
    )
    outcome = await run_input([path], InputEvent("go", "rpc"), CTX)
    assert (outcome.text, outcome.handled) == ("go one two", False)
    assert len(outcome.problems) == 1 and "unknown action 'shout'" in outcome.problems[0].error
    outcome = await run_input([path], InputEvent("stop", "rpc"), CTX)
    assert outcome.handled and outcome.text == "stop one"


async def test_session_before_compact_supplies_or_cancels_the_compaction_without_a_model_call(
    server: ScriptedLLMServer, tmp_path: Path
) -> None:
    ext = _write(
        tmp_path / "compactor.py",
        "def extension(tempi):\n"
        "    tempi.on('session_before_compact', lambda e, ctx: 1 / 0)\n"
        "    def decide(e, ctx):\n"
        "        if e.custom_instructions == 'cancel':\n"
        "            return {'cancel': True}\n"
        "        return {'compaction': {'summary': f'{len(e.messages_to_summarize)} messages, {e.reason}'}}\n"
        "    tempi.on('session_before_compact', decide)\n",
    )
    store = SessionStore(tmp_path)
    path, leaf = write_session(store, tmp_path, turns=6)

    async def compact(instructions: str, entry_id: str) -> tuple[Any, BeforeCompactHooks]:
        hooks = BeforeCompactHooks([ext], CTX, "manual", instructions)
        outcome = await compact_session(
            store, path, leaf, model_for(server), OPTIONS, CompactionSettings(keep_recent_tokens=600),
            instructions, entry_id, "2026-01-01T00:00:09.000Z", "manual", before=hooks,
        )  # fmt: skip
        return outcome, hooks

    with pytest.raises(CompactionCancelled):
        await compact("cancel", "cmp00001")
    outcome, hooks = await compact("go", "cmp00002")
    assert outcome.summary == "12 messages, manual" and outcome.first_kept_entry_id == "u4"
    assert len(hooks.problems) == 1 and "ZeroDivisionError" in hooks.problems[0].error
    entry = store.load(path).tree.get("cmp00002")
    assert entry is not None and entry.to_json_dict()["fromHook"] is True
    assert store.load(path).tree.get("cmp00001") is None
    assert server.requests_for(SCENARIO) == []


TURNS = str(Path(__file__).parent / "extensions" / "turns.py")


async def test_turn_hooks_see_the_previous_turns_answer_and_results_then_the_new_turn(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    path, _ = write_session(store, tmp_path, turns=2)
    context = LlmContext(messages=to_llm_messages(store.load(path).tree.build_context().messages))
    ctx = ExtensionContext(cwd="/work", session_id="s", session_file=str(path))
    problems, effects = await turn_hooks([TURNS], ctx, context, 1)
    assert [e.data for e in effects.custom_entries] == [
        {"event": "turn_end", "turn": 0, "tools": ["c1"], "answer": "answer 1 " + "a" * 400},
        {"event": "turn_start", "turn": 1},
    ]
    assert [(p.event, "turn one broke" in p.error) for p in problems] == [("turn_start", True)]
    _, effects = await turn_hooks([TURNS], ctx, context, 0)
    assert [e.data for e in effects.custom_entries] == [{"event": "turn_start", "turn": 0}]


async def test_agent_end_gets_the_runs_messages_and_its_last_turn_end(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    path, leaf = write_session(store, tmp_path, turns=3)
    ref = SessionFileRef(session_id="s", session_path=str(path), cwd="/work", header_timestamp="t")
    result = await ExtensionActivities(store).agent_end(
        AgentEndInput(file=ref, extensions=[TURNS], leaf_id=leaf, run_entry_id="u2", last_turn=0)
    )
    assert result.effects is not None and not result.problems
    assert [e.data for e in result.effects.custom_entries] == [
        {"event": "turn_end", "turn": 0, "tools": ["c2"], "answer": "answer 2 " + "a" * 400},
        {"event": "agent_end", "roles": ["user", "assistant", "toolResult"]},
    ]


async def test_a_command_reports_its_own_notices_and_refuses_entries_it_cannot_keep(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "cmds.py",
        "def extension(tempi):\n"
        "    def note(args, ctx):\n"
        "        ctx.ui.notify('noted ' + args)\n"
        "        tempi.send_message('later ' + args, deliver_as='follow_up')\n"
        "    def keep(args, ctx):\n"
        "        tempi.append_entry('kept', {'a': args})\n"
        "    def shout(args, ctx):\n"
        "        ctx.ui.notify('x', 'loud')\n"
        "    tempi.register_command('note', '', note)\n"
        "    tempi.register_command('keep', '', keep)\n"
        "    tempi.register_command('shout', '', shout)\n",
    )
    ctx = CommandContext(cwd="/work", session_id="s", session_file="/nowhere.jsonl", has_ui=True)
    ran = []
    for line in ["/note one", "/note two", "/keep it", "/shout"]:
        found = find_command([path], line)
        assert found is not None
        ran.append(await run_command(*found, ctx))
    first, second, kept, shouted = ran
    # Each run shows its own notices only, though the context is shared.
    assert [n.message for n in first.notices] == ["noted one"]
    assert [n.message for n in second.notices] == ["noted two"]
    assert [(m.text, m.deliver_as) for m in second.messages] == [("later two", "follow_up")]
    assert first.prompt is None and first.error is None
    assert kept.error == "/keep: append_entry works in event handlers and tools, not in commands"
    assert shouted.error is not None and "notify_type must be one of info, warning, error" in shouted.error
