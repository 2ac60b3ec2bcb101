"""`tempi web` over HTTP: the token (given once by the URL, then a cookie), the Origin check
on controls, read-only mode, the session list and a session's live transcript, against
real sessions answered by the scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import aiohttp
import pytest

from tempi.cli.html_export import session_tree
from tempi.store.session_store import SessionStore
from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.conftest import run_tempi, write_models_json
from tests.web_rig import SECRET, Console, Rig, start_rig, wait_until

SHARED_TEXT = "One answer, streamed once to every page that watches it. " * 3  # ~2.6 s as streamed

SCENARIO = {
    "turns": [{"text": "Default answer."}],
    "routes": {
        "overview-session": {"turns": [{"text": "Overview answer, **bold**."}]},
        "live-session": {
            "turns": [
                {"text": "First live answer."},
                {
                    "text": "Second live answer, streamed in small pieces.",
                    "chunk_size": 4,
                    "chunk_delay_ms": 60,
                },
                {
                    "text": "Looking.",
                    "tool_calls": [{"name": "bash", "arguments": {"command": "echo web-tool-out"}}],
                },
                {"text": "The tool said it."},
            ]
        },
        "slow-session": {
            "turns": [
                {"text": "Ready."},
                {"text": "A very slow answer. " * 100, "chunk_size": 4, "chunk_delay_ms": 100},
            ]
        },
        "shared-session": {
            "turns": [
                {"text": "Ready to share."},
                {"text": SHARED_TEXT, "chunk_size": 4, "chunk_delay_ms": 60},
            ]
        },
        "guarded-session": {"turns": [{"text": "Guarded answer."}, {"text": "Sent from the right page."}]},
        "controls-session": {"turns": [{"text": "Before the switch."}, {"text": "After the switch."}]},
        "tree-session": {"turns": [{"text": "Answer one."}, {"text": "Answer two."}]},
    },
}


@pytest.fixture(scope="module")
def rig(
    tmp_path_factory: pytest.TempPathFactory, temporal_address: str, scripted_server: ScriptedLLMServer
) -> Iterator[Rig]:
    scripted_server.add_scenario("web-console", SCENARIO)
    home = tmp_path_factory.mktemp("web-home")
    write_models_json(home, scripted_server, "web-console")
    # A second model, one that thinks, to switch to.
    models = json.loads((home / "models.json").read_text())
    mock = models["providers"]["mock"]["models"]
    mock.append({**mock[0], "id": "mock-thinker", "name": "Mock Thinker", "reasoning": True})
    (home / "models.json").write_text(json.dumps(models))
    rig = start_rig(home, tmp_path_factory.mktemp("web-project"), temporal_address)
    try:
        yield rig
    finally:
        rig.close()


@pytest.fixture(scope="module")
def console(rig: Rig) -> Console:
    return rig.start_console()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # No cookie jar: each request shows which credential it carries.
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session:
        yield session


def _auth(console: Console, **extra: str) -> dict[str, str]:
    return {"X-Tempi-Token": console.token, **extra}


async def test_every_request_needs_the_token_which_the_url_turns_into_a_cookie(
    rig: Rig, console: Console, http: aiohttp.ClientSession
) -> None:
    token_file = rig.home / "web" / "token"
    assert token_file.read_text().strip() == console.token
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token_file.stat().st_uid == os.getuid()

    for path in ("/", "/api/sessions", "/s/abc", "/assets/console.js"):
        async with http.get(console.base + path) as refused:
            assert refused.status == 401, path
            assert console.token not in await refused.text()
    async with http.get(console.base + "/?token=wrong") as wrong:
        assert wrong.status == 401

    async with http.get(console.base + f"/?token={console.token}", allow_redirects=False) as opened:
        assert opened.status == 303
        assert opened.headers["Location"] == "/"  # the token leaves the address bar
        cookie = opened.cookies["tempi_web_token"]
        assert cookie.value == console.token
        assert cookie["httponly"] and cookie["samesite"] == "Strict"
    async with http.get(console.base + "/", headers={"Cookie": f"tempi_web_token={console.token}"}) as page:
        assert page.status == 200
        assert 'id="filter"' in await page.text()
        assert "script-src 'self'" in page.headers["Content-Security-Policy"]


async def test_the_overview_lists_a_real_session_with_its_numbers_and_no_secret(
    rig: Rig, console: Console, http: aiohttp.ClientSession
) -> None:
    session_id = rig.run_session("overview-session: say something")
    async with http.get(console.base + "/api/sessions", headers=_auth(console)) as listed:
        assert listed.status == 200
        body = await listed.text()
    rows = {row["id"]: row for row in json.loads(body)["sessions"]}
    row = rows[session_id]
    assert row["cwd"] == str(rig.project)
    assert row["model"] == "mock/mock-model"
    assert row["status"] == "idle"  # its workflow is open, waiting for a prompt
    assert row["turns"] == 1
    assert row["tokens"] == 120  # the scripted usage: 100 in, 20 out
    assert row["cost"] == pytest.approx((100 * 3 + 20 * 15) / 1e6)
    assert row["firstMessage"] == "overview-session: say something"

    # Cost totals per day and per model, from the same summaries.
    totals = json.loads(body)["totals"]
    today = datetime.now().astimezone().date().isoformat()
    assert [day["day"] for day in totals["byDay"]] == [today]  # every session here started today
    assert totals["byDay"][0]["sessions"] == len(rows)
    assert totals["byDay"][0]["cost"] == pytest.approx(sum(r["cost"] for r in rows.values()))
    by_model = {t["model"]: t for t in totals["byModel"]}
    assert set(by_model) == {r["model"] for r in rows.values()}
    for model, total in by_model.items():
        mine = [r for r in rows.values() if r["model"] == model]
        assert total["sessions"] == len(mine)
        assert total["tokens"] == sum(r["tokens"] for r in mine)
        assert total["cost"] == pytest.approx(sum(r["cost"] for r in mine))
    assert by_model["mock/mock-model"]["cost"] >= row["cost"] > 0

    async with http.get(console.base + f"/api/sessions/{session_id}", headers=_auth(console)) as info:
        shown = await info.text()
        assert json.loads(shown)["running"] is True
    first_events = await _read_events(
        http, console, session_id, lambda ops: _has_text(ops, "Overview answer")
    )
    for text in (body, shown, json.dumps(first_events)):
        assert SECRET not in text and "MOCK_API_KEY" not in text
    # The export's renderer made the block: markdown rendered, the prompt shown as the user's.
    answer = next(op["html"] for op in first_events if "Overview answer" in op.get("html", ""))
    assert "<strong>bold</strong>" in answer and 'class="msg assistant' in answer


async def test_controls_come_only_from_the_console_page(
    rig: Rig, console: Console, http: aiohttp.ClientSession
) -> None:
    session_id = rig.run_session("guarded-session: hello")
    url = f"{console.base}/api/sessions/{session_id}/send"
    body = {"text": "guarded-session: from a page", "as": "prompt"}
    async with http.post(url, json=body) as no_token:
        assert no_token.status == 401
    async with http.post(url, json=body, headers=_auth(console)) as no_origin:
        assert no_origin.status == 403
    async with http.post(url, json=body, headers=_auth(console, Origin="http://evil.example")) as foreign:
        assert foreign.status == 403
        assert "console's own page" in (await foreign.json())["error"]
    assert len(rig.messages(session_id)) == 2  # nothing reached the session

    async with http.post(url, json=body, headers=_auth(console, Origin=console.origin)) as sent:
        assert sent.status == 200, await sent.text()
    wait_until(
        lambda: any("Sent from the right page" in json.dumps(m) for m in rig.messages(session_id)),
        what="the answer to the prompt sent through the console",
    )


async def test_read_only_refuses_every_control(rig: Rig, http: aiohttp.ClientSession) -> None:
    session_id = rig.run_session("overview-session: watched only")
    dashboard = rig.start_console("--read-only")
    async with http.get(dashboard.base + "/api/info", headers=_auth(dashboard)) as info:
        assert (await info.json())["readOnly"] is True
    async with http.get(dashboard.base + "/api/sessions", headers=_auth(dashboard)) as listed:
        assert session_id in {row["id"] for row in (await listed.json())["sessions"]}
    for action, body in (
        ("send", {"text": "overview-session: no", "as": "prompt"}),
        ("abort", {}),
        ("model", {"provider": "mock", "id": "mock-thinker"}),
        ("thinking", {"level": "high"}),
        ("compact", {}),
        ("navigate", {"entryId": rig.entries(session_id)[0]["id"]}),
        ("fork", {"entryId": rig.entries(session_id)[0]["id"]}),
    ):
        async with http.post(
            f"{dashboard.base}/api/sessions/{session_id}/{action}",
            json=body,
            headers=_auth(dashboard, Origin=dashboard.origin),
        ) as refused:
            assert refused.status == 403
            assert "read-only" in (await refused.json())["error"]
    assert len(rig.messages(session_id)) == 2


async def test_the_transcript_streams_a_new_answer_as_it_is_written(
    rig: Rig, console: Console, http: aiohttp.ClientSession
) -> None:
    session_id = rig.run_session("live-session: start")
    async with http.get(f"{console.base}/api/sessions/{session_id}/events", headers=_auth(console)) as stream:
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        ops = await _ops_until(stream, lambda ops: _has_text(ops, "First live answer"))
        assert ops[0] == {"op": "reset"}
        assert (await _prompt(http, console, session_id, "live-session: more"))[0] == 200
        ops = await _ops_until(
            stream, lambda ops: _has_text(ops, "Second live answer, streamed in small pieces.")
        )
    texts = [op["html"] for op in ops if op.get("op") == "block"]
    # The prompt, then the answer growing block by block before it is whole.
    assert any("live-session: more" in html for html in texts), ops
    partial = [html for html in texts if "Second" in html and "pieces." not in html]
    assert partial and all("msg assistant streaming" in html for html in partial)
    assert {"op": "state", "running": True, "streaming": True} in ops

    # A tool call, folded with its output under it, in the block of the message that made it.
    assert (await _prompt(http, console, session_id, "live-session: use a tool"))[0] == 200
    ops = await _read_events(http, console, session_id, lambda ops: _has_text(ops, "The tool said it."))
    looking = [op["html"] for op in ops if "Looking." in op.get("html", "")][-1]  # as it stands now
    assert '<details class="tool ok">' in looking and "$ echo web-tool-out" in looking
    assert '<pre class="output">web-tool-out' in looking


async def test_a_page_that_joins_mid_answer_starts_where_the_others_are(
    rig: Rig, console: Console, http: aiohttp.ClientSession
) -> None:
    session_id = rig.run_session("shared-session: ready")
    url = f"{console.base}/api/sessions/{session_id}/events"
    async with http.get(url, headers=_auth(console)) as first:
        await _ops_until(first, lambda ops: _has_text(ops, "Ready to share."))
        assert (await _prompt(http, console, session_id, "shared-session: go"))[0] == 200
        await _ops_until(first, lambda ops: any("One answer" in op.get("html", "") for op in ops))
        async with http.get(url, headers=_auth(console)) as second:
            joined = await _ops_until(second, lambda ops: _has_text(ops, SHARED_TEXT.strip()))
            seen = await _ops_until(first, lambda ops: _has_text(ops, SHARED_TEXT.strip()))
    # The second page starts from the whole conversation so far, the answer part-way (one
    # block, as the first page shows it then), and goes on with the first page's updates.
    assert joined[0] == {"op": "reset"}
    blocks = [op["html"] for op in joined if op.get("op") == "block"]
    assert "Ready to share." in blocks[1] and "shared-session: go" in blocks[2]
    assert "One answer" in blocks[3] and "msg assistant streaming" in blocks[3]
    assert {"op": "state", "running": True, "streaming": True} in joined
    assert [op for op in joined if op.get("op") == "block"][-1] == [
        op for op in seen if op.get("op") == "block"
    ][-1]


async def test_abort_stops_a_slow_answer(rig: Rig, console: Console, http: aiohttp.ClientSession) -> None:
    session_id = rig.run_session("slow-session: get ready")
    base = f"{console.base}/api/sessions/{session_id}"
    headers = _auth(console, Origin=console.origin)
    async with http.get(base + "/events", headers=_auth(console)) as stream:
        await _ops_until(stream, lambda ops: _has_text(ops, "Ready."))
        await _prompt(http, console, session_id, "slow-session: go")
        await _ops_until(stream, lambda ops: any("A very slow" in op.get("html", "") for op in ops))
        async with http.post(base + "/abort", json={}, headers=headers) as aborted:
            assert aborted.status == 200
        ops = await _ops_until(
            stream, lambda ops: {"op": "state", "running": True, "streaming": False} in ops
        )
    assert any("aborted" in op.get("html", "") for op in ops)
    last = rig.messages(session_id)[-1]
    assert last["role"] == "assistant" and last["stopReason"] == "aborted"


async def test_a_stopped_session_shows_from_its_file_and_says_how_to_continue_it(
    rig: Rig, console: Console, http: aiohttp.ClientSession
) -> None:
    session_id = rig.run_session("overview-session: then stop", name="Stopped and named")
    stopped = run_tempi(["stop", session_id, "--no-worker"], cwd=rig.project, env=rig.env)
    assert stopped.returncode == 0, stopped.stderr
    async with http.get(console.base + "/api/sessions", headers=_auth(console)) as listed:
        rows = {row["id"]: row for row in (await listed.json())["sessions"]}
    assert rows[session_id]["status"] == "finished"
    # Its page is titled with the name the overview shows, read from the file.
    async with http.get(f"{console.base}/api/sessions/{session_id}", headers=_auth(console)) as info:
        shown = await info.json()
    assert shown["running"] is False
    assert shown["name"] == rows[session_id]["name"] == "Stopped and named"
    # And its model is the one it ran on, as the overview's row says, not the list's first.
    assert shown["model"] == rows[session_id]["model"] == "mock/mock-model"
    ops = await _read_events(http, console, session_id, lambda ops: {"op": "state", "running": False} in ops)
    assert _has_text(ops, "Overview answer")
    status, answer = await _prompt(http, console, session_id, "overview-session: again")
    assert status == 409
    assert f"tempi --session {session_id}" in json.loads(answer)["error"]


async def _prompt(
    http: aiohttp.ClientSession, console: Console, session_id: str, text: str
) -> tuple[int, str]:
    """A prompt sent as the console's page sends it: its status and body."""
    async with http.post(
        f"{console.base}/api/sessions/{session_id}/send",
        json={"text": text, "as": "prompt"},
        headers=_auth(console, Origin=console.origin),
    ) as sent:
        return sent.status, await sent.text()


async def test_model_thinking_compact_and_export_from_the_console(
    rig: Rig, console: Console, http: aiohttp.ClientSession, scripted_server: ScriptedLLMServer
) -> None:
    session_id = rig.run_session("controls-session: hello")
    base = f"{console.base}/api/sessions/{session_id}"
    headers = _auth(console, Origin=console.origin)
    async with http.get(console.base + "/api/models", headers=_auth(console)) as listed:
        text = await listed.text()
    assert {(m["provider"], m["id"]) for m in json.loads(text)["models"]} == {
        ("mock", "mock-model"),
        ("mock", "mock-thinker"),
    }
    assert (
        SECRET not in text
        and "MOCK_API_KEY" not in text
        and scripted_server.url_for("web-console", "openai-completions") not in text
    )

    async with http.post(
        base + "/model", json={"provider": "mock", "id": "nope"}, headers=headers
    ) as unknown:
        assert unknown.status == 400 and "mock/nope" in (await unknown.json())["error"]
    async with http.post(
        base + "/model", json={"provider": "mock", "id": "mock-thinker"}, headers=headers
    ) as switched:
        assert switched.status == 200, await switched.text()
    async with http.post(base + "/thinking", json={"level": "high"}, headers=headers) as thinking:
        assert (await thinking.json()) == {"thinkingLevel": "high"}
    async with http.get(base, headers=_auth(console)) as info:
        shown = await info.json()
    assert shown["model"] == "mock/mock-thinker" and shown["thinkingLevel"] == "high"
    assert "high" in shown["levels"]

    async with http.post(
        base + "/send", json={"text": "controls-session: again", "as": "prompt"}, headers=headers
    ):
        pass
    answer = wait_until(
        lambda: next((m for m in rig.messages(session_id) if "After the switch" in json.dumps(m)), None),
        what="the answer after the switch",
    )
    assert answer["model"] == "mock-thinker"  # the next turn went to the model chosen here

    async with http.post(base + "/compact", json={}, headers=headers) as compacted:
        compacted_body = await compacted.text()
        assert compacted.status == 200, compacted_body
    entries = [json.loads(line) for line in rig.session_file(session_id).read_text().splitlines()[1:]]
    assert any(e["type"] == "model_change" and e["modelId"] == "mock-thinker" for e in entries)
    assert any(e["type"] == "thinking_level_change" and e["thinkingLevel"] == "high" for e in entries)
    compaction = [e for e in entries if e["type"] == "compaction"]
    assert len(compaction) == 1 and "Scripted summary" in compaction[0]["summary"]
    assert json.loads(compacted_body)["tokensBefore"] == compaction[0]["tokensBefore"]

    async with http.get(base + "/export", headers=_auth(console)) as exported:
        assert exported.status == 200
        assert (
            exported.headers["Content-Disposition"]
            == f'attachment; filename="tempi-session-{session_id}.html"'
        )
        assert "sandbox" in exported.headers["Content-Security-Policy"]
        page = await exported.text()
    assert page.startswith("<!DOCTYPE html>") and "After the switch." in page
    assert SECRET not in page


def _has_text(ops: list[dict[str, Any]], text: str) -> bool:
    return any(text in op.get("html", "") and "streaming" not in op.get("html", "") for op in ops)


async def _ops_until(stream: aiohttp.ClientResponse, done: Any, timeout: float = 30) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while not done(ops):
            line = (await stream.content.readline()).decode()
            if not line:
                raise AssertionError(f"the event stream ended; it had sent {ops}")
            if line.startswith("data: "):
                ops.append(json.loads(line[len("data: ") :]))
    return ops


async def _read_events(
    http: aiohttp.ClientSession, console: Console, session_id: str, done: Any
) -> list[dict[str, Any]]:
    async with http.get(f"{console.base}/api/sessions/{session_id}/events", headers=_auth(console)) as stream:
        return await _ops_until(stream, done)


async def test_the_tree_switches_the_sessions_branch_and_forks_a_new_session(
    rig: Rig, console: Console, http: aiohttp.ClientSession
) -> None:
    session_id = rig.run_session("tree-session: one")
    base = f"{console.base}/api/sessions/{session_id}"
    headers = _auth(console, Origin=console.origin)
    assert (await _prompt(http, console, session_id, "tree-session: two"))[0] == 200
    wait_until(lambda: _entry(rig, session_id, "Answer two."), what="the second answer")
    one, answer_one = _entry(rig, session_id, "tree-session: one"), _entry(rig, session_id, "Answer one.")
    two, answer_two = _entry(rig, session_id, "tree-session: two"), _entry(rig, session_id, "Answer two.")

    async with http.get(base + "/tree", headers=_auth(console)) as got:
        tree = await got.json()
    source = rig.session_file(session_id)
    # The export's sidebar, drawn by the export's renderer: the console has no tree formatter.
    assert tree["html"] == session_tree(SessionStore(rig.home / "sessions").load(source)).html
    assert [f'data-id="{e["id"]}"' in tree["html"] for e in (one, answer_one, two, answer_two)] == [True] * 4
    assert tree["leaf"] == answer_two["id"] and tree["path"][-4:] == [
        e["id"] for e in (one, answer_one, two, answer_two)
    ]
    assert tree["title"] == "4 messages · 1 branch"

    async with http.get(base + "/events", headers=_auth(console)) as stream:
        await _ops_until(stream, lambda ops: _has_text(ops, "Answer two."))
        # Choosing a user message continues from before it, its text back for the composer.
        async with http.post(base + "/navigate", json={"entryId": two["id"]}, headers=headers) as moved:
            assert moved.status == 200, await moved.text()
            assert await moved.json() == {"leaf": answer_one["id"], "editorText": "tree-session: two"}
        # The page's transcript starts again on the branch it moved to.
        ops = await _ops_until(stream, lambda ops: _after_reset(ops, lambda o: o.get("op") == "state"))
        shown = _after_reset(ops, lambda o: True)
        assert _has_text(shown, "Answer one.") and not _has_text(shown, "Answer two.")

        assert (await _prompt(http, console, session_id, "tree-session: three"))[0] == 200
        # (The scripted model answers by the turns in context: "Answer two." again.)
        await _ops_until(
            stream,
            lambda ops: (
                _has_text(ops, "tree-session: three")
                and {"op": "state", "running": True, "streaming": False} in ops
            ),
        )
        three = _entry(rig, session_id, "tree-session: three")
        assert three is not None and three["parentId"] == answer_one["id"]  # on the chosen branch

        # A move made by another front end (here another console) shows on this page too.
        other = rig.start_console()
        async with http.post(
            f"{other.base}/api/sessions/{session_id}/navigate",
            json={"entryId": answer_two["id"]},
            headers=_auth(other, Origin=other.origin),
        ) as moved:
            assert (await moved.json())["leaf"] == answer_two["id"]
        ops = await _ops_until(stream, lambda ops: _after_reset(ops, lambda o: o.get("op") == "state"))
        shown = _after_reset(ops, lambda o: True)
        assert _has_text(shown, "tree-session: two") and not _has_text(shown, "tree-session: three")
    async with http.get(base + "/tree", headers=_auth(console)) as got:
        assert (await got.json())["title"].endswith("2 branches")

    # Fork at the user message "two": a new session file holding the branch before it.
    async with http.post(base + "/fork", json={"entryId": two["id"]}, headers=headers) as forked:
        assert forked.status == 200, await forked.text()
        fork = await forked.json()
    assert fork["editorText"] == "tree-session: two" and fork["id"] != session_id
    fork_file = rig.session_file(fork["id"])
    header, *copied = (json.loads(line) for line in fork_file.read_text().splitlines())
    assert header["parentSession"] == str(source)
    assert [e["id"] for e in copied if e["type"] == "message"] == [one["id"], answer_one["id"]]
    async with http.get(f"{console.base}/api/sessions/{fork['id']}", headers=_auth(console)) as info:
        assert (await info.json())["running"] is True  # continued, ready for its first message

    async with http.post(base + "/navigate", json={"entryId": "nope"}, headers=headers) as unknown:
        assert unknown.status == 404 and "no entry nope" in (await unknown.json())["error"]


def _entry(rig: Rig, session_id: str, text: str) -> dict[str, Any] | None:
    return next((e for e in rig.entries(session_id) if text in json.dumps(e.get("message", {}))), None)


def _after_reset(ops: list[dict[str, Any]], found: Any) -> list[dict[str, Any]]:
    """The ops after the (last) reset when one of them is `found`; else []."""
    resets = [i for i, op in enumerate(ops) if op.get("op") == "reset"]
    tail = ops[resets[-1] + 1 :] if resets else []
    return tail if any(found(op) for op in tail) else []
