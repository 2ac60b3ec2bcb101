"""`tempi web` in a real browser (Debian's chromium over the DevTools protocol): open the
printed URL, find the session in the overview, open it, send a prompt from the page and
watch the scripted answer arrive, then abort a slow answer and see it stop, in the page
and in the session file; move back in the session's tree; lose the console."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.chromium import DevToolsPage, chromium_bin
from tests.web_rig import Rig, scripted_rig

SLOW_TEXT = "This slow answer goes on and on. " * 40  # 1,320 characters, ~33 s as streamed

SCENARIO = {
    "turns": [
        {"text": "The session's first answer."},
        {"text": "A scripted answer to **the page**."},
        {"text": SLOW_TEXT, "chunk_size": 4, "chunk_delay_ms": 100},
    ]
}


@pytest.fixture(scope="module")
def rig(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, scripted_server: ScriptedLLMServer
) -> Iterator[Rig]:
    with scripted_rig(tmp_path_factory, temporal_address, scripted_server, "web-browser", SCENARIO) as rig:
        yield rig


def _js(value: str) -> str:
    return json.dumps(value)


async def _send(page: DevToolsPage, text: str) -> None:
    await page.evaluate(f"document.getElementById('text').value = {_js(text)}")
    await page.evaluate("document.getElementById('send').click()")


async def test_a_session_driven_from_the_browser(rig: Rig, tmp_path: Path) -> None:
    chromium_bin()  # skip (or fail under TEMPI_REQUIRE_CHROMIUM=1) before starting anything
    session_id = rig.run_session("begin")
    console = rig.start_console()
    async with DevToolsPage.open(tmp_path / "profile") as page:
        await page.navigate(f"{console.base}/?token={console.token}")
        row = f"document.querySelector('tr[data-id=\"{session_id}\"]')"
        await page.wait_for(f"{row} && {row}.innerText.includes('idle')")
        assert "begin" in await page.evaluate(f"{row}.innerText")
        assert "mock/mock-model" in await page.evaluate(f"{row}.innerText")
        # The cost totals under the list, by the model the session used.
        await page.wait_for("document.querySelector('#by-model tbody').innerText.includes('mock/mock-model')")

        await page.evaluate(f"{row}.querySelector('a.open').click()")
        messages = "document.getElementById('messages').innerText"
        status = "document.getElementById('status').innerText"
        await page.wait_for(f"{messages}.includes(\"The session's first answer.\") && {status} === 'idle'")
        assert await page.evaluate("location.pathname") == f"/s/{session_id}"
        # The model switch shows the session's model; the export link downloads it.
        await page.wait_for("document.getElementById('model').value === 'mock/mock-model'")
        export = await page.evaluate("document.getElementById('export').getAttribute('href')")
        assert export == f"/api/sessions/{session_id}/export"

        await _send(page, "Answer me from the page")
        await page.wait_for(f"{messages}.includes('Answer me from the page')")
        # Rendered as the export renders it: markdown, in an assistant block.
        await page.wait_for(
            "[...document.querySelectorAll('#messages .msg.assistant strong')]"
            ".some(b => b.innerText === 'the page')"
        )
        await page.wait_for(f"{status} === 'idle'")

        await _send(page, "Now something slow")
        await page.wait_for(f"{status} === 'working' && {messages}.includes('This slow answer goes on')")
        await page.evaluate("document.getElementById('abort').click()")
        await page.wait_for(f"{status} === 'idle' && {messages}.includes('aborted')")

        # The tree, as the export draws it: choose the second prompt and continue from
        # there, as /tree does; its text comes back to the composer, the branch goes.
        node = (
            "[...document.querySelectorAll('#tree .node.user')]"
            ".find(n => n.innerText.includes('Answer me from the page'))"
        )
        await page.wait_for(f"{node} && {node}.classList.contains('on-path')")
        await page.evaluate(f"{node}.click()")
        await page.wait_for("!document.getElementById('switch').disabled")
        await page.evaluate("document.getElementById('switch').click()")
        await page.wait_for(
            "document.getElementById('text').value === 'Answer me from the page' && "
            f"!{messages}.includes('Answer me from the page') && {messages}.includes(\"The session's first answer.\")"
        )
        assert await page.evaluate("document.getElementById('offline').hidden") is True

        # The console goes away: the page says so instead of going dead.
        console.stop()
        await page.wait_for("!document.getElementById('offline').hidden")
        assert "reconnecting" in await page.evaluate("document.getElementById('offline').innerText")

    answers = [m for m in rig.messages(session_id) if m["role"] == "assistant"]
    assert len(answers) == 3
    assert answers[1]["content"][0]["text"] == "A scripted answer to **the page**."
    assert answers[2]["stopReason"] == "aborted"
    stopped_at = "".join(b.get("text", "") for b in answers[2]["content"])
    assert len(stopped_at) < len(SLOW_TEXT)
    prompts = [m["content"] for m in rig.messages(session_id) if m["role"] == "user"]
    assert json.dumps(prompts).count("Answer me from the page") == 1
