"""`tempi --export` writes one self-contained page a reader can use: every branch of the
session in a sidebar, a way to move between them, rendered markdown, thinking and tool
calls folded, token/cost/duration counts and a search. Checked in a real headless browser
(Debian's chromium): the DOM after the page's script ran, and screenshots compared with
references in tests/fixtures/export/.

The session (tests/fixtures/export/branched-session.jsonl) asks for a coloured greeting;
after the assistant's plan it splits: one branch asks for green (u0000002, answered with an
edit), a later one for red (u0000003, the current leaf).
"""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tempi.cli.export_entries import message_html
from tests.chromium import assert_looks_like, chromium_bin, dump_dom, screenshot
from tests.conftest import run_tempi, tempi_env

EXPORT_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "export"
SESSION = EXPORT_FIXTURES / "branched-session.jsonl"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def _tags(html: str) -> list[tuple[str, dict[str, str]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def _article_classes(dom: str, entry_id: str) -> set[str]:
    found = [a for tag, a in _tags(dom) if tag == "article" and a.get("data-id") == entry_id]
    assert len(found) == 1, f"no single article for {entry_id}"
    return set(found[0]["class"].split())


def _tree_classes(dom: str, entry_id: str) -> set[str]:
    found = [
        a
        for tag, a in _tags(dom)
        if tag == "a" and "node" in a.get("class", "") and a.get("data-id") == entry_id
    ]
    assert len(found) == 1, f"no single sidebar entry for {entry_id}"
    return set(found[0]["class"].split())


def _stat(dom: str, key: str) -> tuple[str, str]:
    """(this branch, whole session) of one row of the stats table."""
    match = re.search(
        rf'<tr data-stat="{key}"><th>[^<]*</th><td class="branch">([^<]*)</td><td>([^<]*)</td>', dom
    )
    assert match, f"no stats row {key}"
    return match.group(1), match.group(2)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture session exported by the real command line, times shown in UTC."""
    work = tmp_path_factory.mktemp("export")
    session = work / SESSION.name
    shutil.copyfile(SESSION, session)
    out = work / "session.html"
    done = run_tempi(
        ["--export", str(session), str(out)], cwd=work, env=tempi_env(work / "home", None, TZ="UTC")
    )
    assert done.returncode == 0, done.stderr
    assert f"Exported to {out}" in done.stdout
    return out


def _url(page: Path, hash_: str = "") -> str:
    return page.as_uri() + hash_


def test_export_is_one_self_contained_file_with_every_branch(exported: Path) -> None:
    html = exported.read_text(encoding="utf-8")
    # Both branches are in the file, not only the current one.
    assert "Use green, please." in html and "Actually, make it red instead." in html
    assert "Done: the greeting is now <em>green</em>." in html
    # Nothing is fetched from anywhere: no external scripts, styles, fonts or images.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<link" not in html and "@import" not in html and "<script src" not in html
    # The user's hostile text stays text.
    assert "<script>alert('pwned')" not in html and "<img src=x" not in html


def test_browser_shows_the_tree_markdown_folded_tools_and_stats(exported: Path, tmp_path: Path) -> None:
    dom = dump_dom(chromium_bin(), _url(exported), tmp_path / "profile")
    # The sidebar lists both branches; the page opens on the current one (red).
    assert {"on-path"} <= _tree_classes(dom, "u0000003")
    assert "on-path" not in _tree_classes(dom, "u0000002")
    assert "off" not in _article_classes(dom, "u0000003")
    assert "off" in _article_classes(dom, "u0000002")
    assert "├─ " in dom and "└─ " in dom
    assert '<span class="tag">red variant</span>' in dom
    # Markdown is rendered, not shown raw.
    assert "<strong>hello</strong>" in dom and "**hello**" not in dom.split('id="messages"')[1]
    assert '<pre><code class="language-sh">' in dom
    assert "<h2>Plan</h2>" in dom and "<table>" in dom
    # Thinking and tool calls are there but folded.
    tools = [a for tag, a in _tags(dom) if tag == "details" and "tool" in a.get("class", "").split()]
    thinking = [a for tag, a in _tags(dom) if tag == "details" and "thinking" in a.get("class", "").split()]
    assert len(tools) == 2 and len(thinking) == 1
    assert all("open" not in a for a in tools + thinking)
    assert "$ cat greet.sh" in dom and "echo hello" in dom
    # Stats: this branch (u1, plan, red) and the whole session (both branches).
    assert _stat(dom, "in") == ("4,400", "8,200")
    assert _stat(dom, "out") == ("340", "500")
    assert _stat(dom, "cr") == ("2,700", "4,500")
    assert _stat(dom, "cost") == ("$0.0436", "$0.0676")
    assert _stat(dom, "duration") == ("5m 12s", "5m 12s")
    assert _stat(dom, "messages") == ("2 / 3", "3 / 5")
    # The injected script never became an element.
    assert "alert('pwned')" in dom and not re.search(r"<script>\s*alert", dom)


def test_browser_moves_to_the_other_branch(exported: Path, tmp_path: Path) -> None:
    dom = dump_dom(chromium_bin(), _url(exported, "#entry=u0000002"), tmp_path / "profile")
    assert "off" not in _article_classes(dom, "u0000002")
    assert "off" not in _article_classes(dom, "as000004")  # down to the branch's newest leaf
    assert "off" in _article_classes(dom, "u0000003")
    assert "off" not in _article_classes(dom, "u0000001")  # from the root
    assert "selected" in _tree_classes(dom, "u0000002")
    assert "on-path" not in _tree_classes(dom, "u0000003")
    # The branch's numbers are recounted for the green branch; the session's stay.
    assert _stat(dom, "in") == ("6,500", "8,200")
    assert _stat(dom, "cost") == ("$0.0574", "$0.0676")
    assert _stat(dom, "duration") == ("1m 40s", "5m 12s")
    assert _stat(dom, "tools") == ("2", "2")


def test_browser_search_hides_what_does_not_match(exported: Path, tmp_path: Path) -> None:
    dom = dump_dom(chromium_bin(), _url(exported, "#q=Green"), tmp_path / "profile")
    # On the current (red) branch only the plan mentions green; the rest is hidden.
    assert "miss" not in _article_classes(dom, "as000002")
    for other in ("u0000001", "as000001", "u0000003", "as000005"):
        assert "miss" in _article_classes(dom, other)
    assert '<mark class="hit">green</mark>' in dom
    assert "1 of 5 messages on this branch match, 3 in the whole session" in dom
    # The sidebar keeps the matches of every branch, so the reader can go to them.
    assert "hit" in _tree_classes(dom, "u0000002") and "hit" in _tree_classes(dom, "as000004")
    assert "miss" in _tree_classes(dom, "u0000003")


@pytest.mark.parametrize(
    ("name", "hash_"), [("default", ""), ("green-branch-search", "#entry=u0000002&q=green")]
)
def test_export_screenshot_matches_the_reference(
    exported: Path, tmp_path: Path, name: str, hash_: str
) -> None:
    browser = chromium_bin()
    reference = EXPORT_FIXTURES / f"screenshot-{name}.png"
    shot = tmp_path / f"{name}.png"
    actual = screenshot(browser, _url(exported, hash_), shot, tmp_path / "profile", (1280, 900))
    assert_looks_like(actual, shot, reference, name)


def test_choosing_an_entry_shows_its_newest_continuation(tmp_path: Path) -> None:
    """An entry with two follow-ups, the first of which was answered after the second was
    written: choosing the entry shows the branch below it written most recently."""

    def message(entry_id: str, parent: str | None, second: int, role: str, text: str) -> dict[str, object]:
        body: dict[str, object] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 0}
        if role == "assistant":
            body.update(api="openai-completions", provider="mock", model="mock-model", stopReason="stop")
        stamp = f"2026-11-20T10:00:{second:02d}.000Z"
        return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": stamp, "message": body}

    lines: list[dict[str, object]] = [
        {"type": "session", "version": 3, "id": "leafy", "timestamp": "2026-11-20T10:00:00.000Z", "cwd": "/"},
        message("q1", None, 1, "user", "first question"),
        message("a1", "q1", 2, "assistant", "first answer"),
        message("q2", "a1", 3, "user", "follow-up one"),
        message("q3", "a1", 4, "user", "follow-up two"),
        message("a2", "q2", 5, "assistant", "answer to follow-up one, written after q3"),
        # Written last, so the page opens on it; choosing a1 must leave it.
        message("a1b", "q1", 6, "assistant", "another first answer"),
    ]
    session = tmp_path / "leafy.jsonl"
    session.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "leafy.html"
    done = run_tempi(
        ["--export", str(session), str(out)], cwd=tmp_path, env=tempi_env(tmp_path / "home", None)
    )
    assert done.returncode == 0, done.stderr
    dom = dump_dom(chromium_bin(), _url(out, "#entry=a1"), tmp_path / "profile")
    assert "off" not in _article_classes(dom, "a2")
    assert "off" not in _article_classes(dom, "q2")
    assert "off" in _article_classes(dom, "q3")
    assert "off" in _article_classes(dom, "a1b")


def test_a_tool_result_counts_its_lines_as_printed() -> None:
    call = {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "seq 1 30"}}
    answer = {"role": "assistant", "content": [call], "stopReason": "toolUse"}
    printed = "".join(f"{n}\n" for n in range(1, 31))
    result = {"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
              "content": [{"type": "text", "text": printed}], "isError": False}  # fmt: skip
    _, shown = message_html(answer, {"c1": result})
    assert "30 lines of output" in shown
    one = dict(result, content=[{"type": "text", "text": "no newline at the end"}])
    assert "1 line of output" in message_html(answer, {"c1": one})[1]
