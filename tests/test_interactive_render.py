"""The interactive mode's pieces that need no terminal: what events, messages and inputs
turn into on screen."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from rich.console import Console, RenderableType

from tempi.agent.model_spec import ModelSpec
from tempi.agent.session_entries import parse_entry
from tempi.agent.session_tree import SessionTree
from tempi.agent.token_counts import short_tokens
from tempi.cli.interactive.commands import find_command
from tempi.cli.interactive.footer import AnswerUsage, FooterInfo, answers_in
from tempi.cli.interactive.input_editor import InputCompleter
from tempi.cli.interactive.picker import Picker, PickerItem
from tempi.cli.interactive.render import Display, LiveView, bash_block, history_blocks, tool_block
from tempi.cli.interactive.tree_view import TreeView, tool_call_text


def plain(*blocks: RenderableType) -> str:
    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None, force_terminal=False)
    for block in blocks:
        console.print(block)
    return out.getvalue()


def _assistant(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], **extra}


def test_a_streaming_answer_stays_live_until_it_ends() -> None:
    view = LiveView()
    assert view.apply({"type": "agent_start"}, 0.0) == []
    view.apply({"type": "message_start", "message": _assistant("")}, 0.0)
    assert view.apply({"type": "message_update", "message": _assistant("Hal")}, 0.1) == []
    assert "Hal" in plain(view.live(0.1) or "")
    done = view.apply({"type": "message_end", "message": _assistant("Hello **there**")}, 0.2)
    assert plain(*done).strip() == "Hello there"
    assert "Hello" not in plain(view.live(0.2) or "")  # nothing is shown twice


def test_a_running_tool_shows_a_spinner_its_time_and_output_tail() -> None:
    view = LiveView(streaming=True)
    view.apply({"type": "tool_execution_start", "toolCallId": "c1", "toolName": "bash",
                "args": {"command": "make test"}}, 10.0)  # fmt: skip
    view.apply({"type": "tool_execution_update", "toolCallId": "c1",
                "partialResult": {"content": [{"type": "text", "text": "a\nb\nc\nd\n"}]}}, 11.0)  # fmt: skip
    live = plain(view.live(13.0) or "")
    assert "$ make test  3s" in live
    assert "b\nc\nd" in live and "a\n" not in live
    end = view.apply({"type": "tool_execution_end", "toolCallId": "c1", "toolName": "bash",
                      "result": {"content": [{"type": "text", "text": "ok"}]}, "isError": False}, 14.5)  # fmt: skip
    assert plain(*end).splitlines()[0] == "✓ $ make test  4.5s"
    assert "Working" in plain(view.live(14.5) or "")


def test_long_output_is_collapsed_and_kept_whole_for_expanding() -> None:
    output = "\n".join(f"line {i}" for i in range(30))
    bash = tool_block(
        "bash", {"command": "seq"}, {"content": [{"type": "text", "text": output}]}, False, None
    )
    shown = plain(bash.block)
    assert "line 29" in shown and "line 0\n" not in shown  # commands: the end matters
    assert "25 earlier lines" in shown
    assert bash.full_output == output
    read = tool_block("read", {"path": "a.py"}, {"content": [{"type": "text", "text": output}]}, False, None)
    assert "line 0\n" in plain(read.block) and "line 29" not in plain(read.block)


def test_previews_have_pis_lengths_and_words_and_expand() -> None:
    def output(n: int) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "\n".join(f"row {i}" for i in range(1, n + 1))}]}

    bash = plain(tool_block("bash", {"command": "make"}, output(30), False, None).block).splitlines()
    assert bash == ["✓ $ make", "... (25 earlier lines, ctrl+o to expand)"] + [
        f"row {i}" for i in range(26, 31)
    ]
    read = plain(tool_block("read", {"path": "a"}, output(30), False, None).block).splitlines()
    assert read[1:] == [f"row {i}" for i in range(1, 11)] + ["... (20 more lines, ctrl+o to expand)"]
    for name, shown in (("grep", 15), ("find", 20), ("ls", 20)):
        lines = plain(tool_block(name, {"pattern": "x"}, output(40), False, None).block).splitlines()
        assert lines[-1] == f"... ({40 - shown} more lines, ctrl+o to expand)" and len(lines) == shown + 2
    mine = plain(bash_block("seq 40", "\n".join(map(str, range(1, 41))), 0, False).block).splitlines()
    assert mine == ["✓ $ seq 40"] + [str(i) for i in range(21, 41)] + ["... 20 more lines (ctrl+o to expand)"]
    whole = plain(tool_block("bash", {"command": "make"}, output(30), False, None, expanded=True).block)
    assert whole.splitlines()[1:] == [f"row {i}" for i in range(1, 31)] + ["(ctrl+o to collapse)"]


def test_hidden_thinking_shows_pis_placeholder() -> None:
    message = {"role": "assistant", "content": [{"type": "thinking", "thinking": "secret musing"},
                                                {"type": "text", "text": "Done."}]}  # fmt: skip
    assert "secret musing" in plain(*history_blocks([message]))
    hidden = plain(*history_blocks([message], Display(hide_thinking=True)))
    assert "secret musing" not in hidden and hidden.split() == ["Thinking...", "Done."]
    view = LiveView(display=Display(hide_thinking=True))
    assert "secret musing" not in plain(*view.apply({"type": "message_end", "message": message}, 0.0))


def test_an_edit_shows_its_diff_and_a_failure_is_marked() -> None:
    edit = tool_block(
        "edit", {"path": "a.py"},
        {"content": [{"type": "text", "text": "ok"}], "details": {"diff": "-1 old\n+1 new"}}, False, None,
    )  # fmt: skip
    assert plain(edit.block).splitlines() == ["✓ edit a.py", "-1 old", "+1 new"]
    failed = tool_block(
        "read", {"path": "x"}, {"content": [{"type": "text", "text": "no such file"}]}, True, None
    )
    assert plain(failed.block).splitlines() == ["✗ read x", "no such file"]


def test_queue_and_aborted_answers() -> None:
    view = LiveView(streaming=True)
    view.apply({"type": "queue_update", "steering": ["stop"], "followUp": ["then this"]}, 0.0)
    assert (view.steering, view.follow_up) == (["stop"], ["then this"])
    end = view.apply({"type": "message_end", "message": _assistant("partial", stopReason="aborted")}, 0.0)
    assert "Aborted." in plain(*end)


def test_history_pairs_tool_calls_with_their_results() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": [{"type": "text", "text": "Sure."},
                                          {"type": "toolCall", "id": "t1", "name": "ls", "arguments": {}}]},
        {"role": "toolResult", "toolCallId": "t1", "toolName": "ls", "isError": False,
         "content": [{"type": "text", "text": "a.py\nb.py"}]},
        {"role": "bashExecution", "command": "pwd", "output": "/w", "exitCode": 0},
    ]  # fmt: skip
    text = plain(*history_blocks(messages))
    assert " ".join(text.split()) == "❯ list files Sure. ✓ ls . a.py b.py ✓ $ pwd /w"


def test_picker_filters_by_words_and_wraps_around() -> None:
    chosen: list[Any] = []

    async def choose(value: Any) -> None:
        chosen.append(value)

    picker = Picker("Models", [PickerItem("anthropic/claude", 1), PickerItem("openai/gpt-5", 2),
                               PickerItem("openai/gpt-4o", 3)], choose)  # fmt: skip
    picker.type("open 4")
    assert picker.chosen() == PickerItem("openai/gpt-4o", 3)
    picker.backspace()
    picker.backspace()
    picker.move(1)
    assert picker.chosen() is not None and picker.chosen().value == 3  # type: ignore[union-attr]
    picker.move(1)
    assert picker.chosen().value == 2  # type: ignore[union-attr]
    picker.type("zzz")
    assert picker.chosen() is None


def test_completion_of_commands_and_files(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / "setup.cfg").write_text("")
    (tmp_path / ".secret").write_text("")
    completer = InputCompleter(lambda: [("model", "choose"), ("name", "name it"), ("new", "new")], tmp_path)

    def complete(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]

    assert complete("/n") == ["/name", "/new"]
    assert complete("/model x") == []
    assert complete("look at @s") == ["@setup.cfg", "@src/"]
    assert complete("look at @src/m") == ["@src/main.py"]
    assert complete("@") == ["@setup.cfg", "@src/"]  # hidden files only when asked for


def test_commands_are_found_by_unique_prefix() -> None:
    found = find_command("/comp keep the API notes")
    assert found is not None and (found[0].name, found[1]) == ("compact", "keep the API notes")
    assert find_command("/n") is None  # /name or /new
    assert find_command("/etc/hosts is odd") is None


def _message(entry_id: str, parent: str | None, role: str, text: str) -> Any:
    body: dict[str, Any] = {"role": role, "content": text, "timestamp": 0}
    if role == "assistant":
        body.update(content=[{"type": "text", "text": text}], api="openai-completions",
                    provider="p", model="m", stopReason="stop")  # fmt: skip
    return parse_entry({"type": "message", "id": entry_id, "parentId": parent,
                        "timestamp": "2025-01-01T00:00:00.000Z", "message": body})  # fmt: skip


def _branchy_tree() -> SessionTree:
    return SessionTree(
        [
            _message("a", None, "user", "first"),
            _message("b", "a", "assistant", "answer"),
            _message("c", "b", "user", "left"),
            _message("c2", "c", "assistant", "left answer"),
            _message("d", "b", "user", "right"),
            _message("d2", "d", "assistant", "right answer"),
            _message("e", "d2", "user", "deeper one"),
            _message("f", "d2", "user", "deeper two"),
        ]
    )


def _drawn(view: TreeView) -> list[str]:
    return "".join(text for _, text in view.lines()).splitlines()[3:]


def test_tree_draws_pis_connectors_with_the_current_branch_first() -> None:
    view = TreeView(_branchy_tree(), "f")
    assert _drawn(view) == [
        "  • user: first",
        "  • assistant: answer",
        "  ├⊟ • user: right",
        "  │     • assistant: right answer",
        "› │     ├─ • user: deeper two",
        "  │     └─ user: deeper one",
        "  └⊟ user: left",
        "        assistant: left answer",
        "  (5/8)",
    ]


def test_tree_folds_branches_moves_between_them_and_searches() -> None:
    view = TreeView(_branchy_tree(), "f", selected_id="d")
    view.fold_or_up()  # "right" starts a branch: it folds
    assert _drawn(view)[2:4] == ["› ├⊞ • user: right", "  └⊟ user: left"]
    view.unfold_or_down()
    assert len(_drawn(view)) == 9
    view.unfold_or_down()  # not folded: down to the next branch point's first child
    assert view.selected_id() == "f"
    view.fold_or_up()  # a leaf cannot fold: up to the start of the branch above it
    assert view.selected_id() == "d"
    view.type("deeper")
    assert [line.strip("› ") for line in _drawn(view)] == ["• user: deeper two", "user: deeper one", "(2/2)"]
    assert view.clear_query() and not view.clear_query()
    assert view.selected_id() == "e"  # the cursor stays where the search left it
    view.move(-6)
    assert view.selected_id() == "c2"  # and wraps around at the top


def test_tree_names_tool_results_as_pi_does() -> None:
    assert tool_call_text("bash", {"command": "ls -la"}) == "[bash: ls -la]"
    assert tool_call_text("read", {"path": "a.py", "offset": 10, "limit": 5}) == "[read: a.py:10-14]"
    assert tool_call_text("grep", {"pattern": "TODO"}) == "[grep: /TODO/ in .]"


def test_footer_shows_pis_stats_line() -> None:
    model = ModelSpec(id="m", name="m", api="openai-completions", provider="p", context_window=200_000)
    footer = FooterInfo(cwd="/w", model=model, context_tokens=50_000, session_name="fix tests")
    footer.saw_answer({"timestamp": 1, "model": "m", "usage": {"input": 1234, "output": 56, "cacheRead": 25_000,
                       "cacheWrite": 0, "cost": {"total": 0.25}}})  # fmt: skip
    text = "".join(part[1] for part in footer.lines(100))
    assert "↑1.2k ↓56 R25k $0.250 25.0%/200k (auto)" in text
    assert "fix tests" in text and "p/m • thinking off" in text
    empty = FooterInfo(cwd="/w", model=model, auto_compaction=False)
    assert empty.stats_text() == "?/200k"


def test_footer_counts_each_answer_once_from_file_and_events() -> None:
    model = ModelSpec(id="m", name="m", api="openai-completions", provider="p", context_window=1000)
    answer = {"role": "assistant", "timestamp": 5, "model": "m", "content": [],
              "usage": {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.5}}}  # fmt: skip
    entries = [
        parse_entry({"type": "message", "id": "a", "parentId": None, "timestamp": "2025-01-01T00:00:00.000Z",
                     "message": dict(answer, api="openai-completions", provider="p", stopReason="stop")})
    ]  # fmt: skip
    footer = FooterInfo(cwd="/w", model=model)
    footer.saw_answer(answer)  # seen live, then found in the file
    footer.saw_answer(dict(answer, timestamp=6))  # seen live only, not written yet
    footer.file_answers = answers_in(entries)
    assert footer.totals() == AnswerUsage(200, 20, 0, 0, 1.0)
    assert [short_tokens(n) for n in (999, 1000, 9_950, 12_345, 1_234_567, 12_345_678)] == [
        "999", "1.0k", "9.9k", "12k", "1.2M", "12M"]  # fmt: skip
