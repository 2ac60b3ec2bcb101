"""`tempi web`'s pipelines over HTTP: a real pipeline run (detached, on the rig's worker)
against the scripted model, listed on the overview, its shards table, and the operator
controls sent from the console: pause, skip, retry, resume and cancel, each as
`tempi pipeline` would send it."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tests.chromium import DevToolsPage
from tests.conftest import run_tempi, write_models_json
from tests.pipeline_repo import git
from tests.test_pipeline_controls import _routes
from tests.test_pipeline_run import SPEC, VALUES, make_fixture, module, write
from tests.web_rig import Console, start_rig


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session:
        yield session


async def _get(http: aiohttp.ClientSession, console: Console, path: str) -> Any:
    async with http.get(console.base + path, headers={"X-Tempi-Token": console.token}) as got:
        assert got.status == 200, await got.text()
        return await got.json()


async def _control(
    http: aiohttp.ClientSession, console: Console, workflow_id: str, origin: str | None = None, **body: Any
) -> tuple[int, dict[str, Any]]:
    headers = {"X-Tempi-Token": console.token, "Origin": origin or console.origin}
    async with http.post(
        f"{console.base}/api/pipelines/{workflow_id}/control", json=body, headers=headers
    ) as answer:
        return answer.status, await answer.json()


async def _until(
    http: aiohttp.ClientSession, console: Console, workflow_id: str, done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    deadline = time.monotonic() + 180
    while True:
        shown = await _get(http, console, f"/api/pipelines/{workflow_id}")
        if done(shown):
            return shown
        assert time.monotonic() < deadline, shown
        await asyncio.sleep(0.5)


def _states(shown: dict[str, Any]) -> dict[str, str]:
    return {row["files"][0]: row["state"] for row in shown["shardRows"]}


async def test_a_pipeline_is_listed_shown_and_steered_from_the_console(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, http: aiohttp.ClientSession
) -> None:
    scripted_server.add_scenario("web-pipeline", {"routes": _routes()})
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "web-pipeline")
    repo = make_fixture(tmp_path / "repo")
    (repo / "controls.yaml").write_text(SPEC.replace("concurrency: 2", "concurrency: 1"))
    rig = start_rig(home, repo, temporal_address)
    try:
        console = rig.start_console()
        dashboard = rig.start_console("--read-only")
        started = run_tempi(["pipeline", "run", "controls.yaml", "--detach"], cwd=repo, env=rig.env)
        assert started.returncode == 0, started.stdout + started.stderr
        workflow_id = started.stdout.split("workflow ")[1].split()[0]

        status, said = await _control(http, console, workflow_id, action="pause")
        assert status == 200 and "paused" in said["said"], said
        status, said = await _control(http, console, workflow_id, action="skip", shard="src/mods/gamma.py")
        assert status == 200, said
        # The pipeline's own refusal, in its words; and the access rules of every control.
        status, said = await _control(http, console, workflow_id, action="skip", shard="src/mods/omega.py")
        assert status == 409 and "no shard 'src/mods/omega.py'" in said["error"]
        status, said = await _control(http, console, workflow_id, action="concurrency", value=0)
        assert status == 409 and "give a positive whole number" in said["error"]
        status, said = await _control(
            http, console, workflow_id, origin="http://evil.example", action="resume"
        )
        assert status == 403
        status, said = await _control(http, dashboard, workflow_id, action="resume")
        assert status == 403 and "read-only" in said["error"]

        shown = await _get(http, console, f"/api/pipelines/{workflow_id}")
        assert shown["status"] == "paused" and shown["running"] is True
        assert _states(shown)["src/mods/gamma.py"] == "skipped"
        listed = await _until_listed(http, console, workflow_id)
        assert listed["name"] == "migrate" and listed["shards"] == 4

        # Resumed and paused again: the one slot takes alpha, which fails; nothing starts after it.
        assert (await _control(http, console, workflow_id, action="resume"))[0] == 200
        assert (await _control(http, console, workflow_id, action="pause"))[0] == 200
        shown = await _until(
            http, console, workflow_id, lambda s: _states(s)["src/mods/alpha.py"] == "failed"
        )
        alpha = shown["shardRows"][0]
        assert alpha["repairs"] == 1 and alpha["cost"] > 0 and alpha["session"]
        assert "verify failed" in alpha["reason"]
        assert _states(shown)["src/mods/beta.py"] == "pending"
        status, said = await _control(http, console, workflow_id, action="retry", shard="src/mods/delta.py")
        assert status == 409 and "only a failed or conflict shard runs again" in said["error"]
        status, said = await _control(http, console, workflow_id, action="retry", shard="src/mods/alpha.py")
        assert status == 200, said
        assert (await _control(http, console, workflow_id, action="resume"))[0] == 200

        shown = await _until(http, console, workflow_id, lambda s: not s["running"])
        assert shown["status"] == "done (exit 0): 3 committed, 1 skipped", shown["status"]
        assert _states(shown) == {
            "src/mods/alpha.py": "committed",
            "src/mods/beta.py": "committed",
            "src/mods/delta.py": "committed",
            "src/mods/gamma.py": "skipped",
        }
        commits = {row["files"][0]: row["commit"] for row in shown["shardRows"] if row["commit"]}
        branch = git(repo, "log", "--format=%H", "main..tempi/migrate").split()
        assert sorted(commits.values()) == sorted(branch)
        assert shown["shardRows"][0]["retries"] == 1
        # A shard's session opens from the table's link, from the pipeline's directory.
        transcript = await _transcript(http, console, shown["shardRows"][0]["session"])
        assert "src/mods/alpha.py" in transcript and "<p>Done.</p>" in transcript  # the retry's
        status, said = await _control(http, console, workflow_id, action="cancel")
        assert status == 409 and "there is nothing to cancel" in said["error"]
        if shutil.which("chromium"):  # the page draws the same table (test_web_browser needs it)
            await _page_shows(console, workflow_id, tmp_path / "profile")
    finally:
        rig.close()


async def _until_listed(http: aiohttp.ClientSession, console: Console, workflow_id: str) -> dict[str, Any]:
    # The server's list of workflows catches up with a start a moment later.
    deadline = time.monotonic() + 30
    while True:
        rows = {row["id"]: row for row in (await _get(http, console, "/api/pipelines"))["pipelines"]}
        if workflow_id in rows:
            return rows[workflow_id]
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)


async def _page_shows(console: Console, workflow_id: str, profile: Path) -> None:
    async with DevToolsPage.open(profile) as page:
        await page.navigate(f"{console.base}/?token={console.token}")
        link = f"document.querySelector('#pipelines tr[data-id=\"{workflow_id}\"] a')"
        await page.wait_for(f"!!{link}")
        await page.evaluate(f"{link}.click()")
        rows = "[...document.querySelectorAll('#shards tbody tr')]"
        await page.wait_for(f"{rows}.length === 4")
        states = await page.evaluate(f"{rows}.map(r => r.children[2].innerText).join(',')")
        assert states == "committed,committed,committed,skipped"
        assert "done (exit 0)" in await page.evaluate("document.getElementById('status').innerText")
        assert await page.evaluate("document.getElementById('pause').disabled") is True


async def _transcript(http: aiohttp.ClientSession, console: Console, session_id: str) -> str:
    url = f"{console.base}/api/sessions/{session_id}/events"
    seen = ""
    async with http.get(url, headers={"X-Tempi-Token": console.token}) as stream:
        assert stream.status == 200
        async with asyncio.timeout(30):
            while '"running": false' not in seen:
                seen += (await stream.content.readline()).decode()
    return seen


SLOW_ALPHA = "Migrating alpha, one small piece at a time. " * 14  # 616 characters, ~9 s as streamed


def _watched_routes() -> dict[str, Any]:
    """Every shard migrates at once; alpha's first answer streams slowly, to be watched."""
    routes = _routes()
    good = routes["beta.py"]["turns"]
    alpha_write = write("src/mods/alpha.py", module("alpha", "new_api", VALUES["alpha"]))
    slow = {**alpha_write, "text": SLOW_ALPHA, "chunk_size": 4, "chunk_delay_ms": 60}
    return {**routes, "alpha.py": {"turns": [slow, {"text": "Done."}]}, "beta.py": {"turns": good}}


async def test_a_running_shards_session_streams_into_the_pipeline_page_and_the_reports_follow(
    tmp_path: Path, temporal_address: str, scripted_server: ScriptedLLMServer, http: aiohttp.ClientSession
) -> None:
    scripted_server.add_scenario("web-pipeline-watch", {"routes": _watched_routes()})
    home = tmp_path / "home"
    write_models_json(home, scripted_server, "web-pipeline-watch")
    repo = make_fixture(tmp_path / "repo")
    rig = start_rig(home, repo, temporal_address)
    try:
        console = rig.start_console()
        started = run_tempi(
            ["pipeline", "run", "pipeline.yaml", "--junit", "out/junit.xml", "--detach"],
            cwd=repo,
            env=rig.env,
        )
        assert started.returncode == 0, started.stdout + started.stderr
        workflow_id = started.stdout.split("workflow ")[1].split()[0]

        # While alpha's session runs, its row names the workflow that runs it; the page's
        # panel follows it through the session view's stream.
        shown = await _until(http, console, workflow_id, lambda s: bool(s["shardRows"][0]["workflow"]))
        alpha = shown["shardRows"][0]
        assert alpha["state"] == "running" and alpha["session"]
        assert all(row["workflow"] is None for row in shown["shardRows"] if row["state"] == "pending")
        reports = await _get(http, console, f"/api/pipelines/{workflow_id}/reports")
        assert reports == {"markdownHtml": None, "downloads": []}  # nothing is written while it runs
        watch = _shard_stream(http, console, alpha["session"], alpha["workflow"])
        if shutil.which("chromium"):  # the page's panel too, at the same time
            ops, _ = await asyncio.gather(watch, _page_watches(console, workflow_id, tmp_path / "profile"))
        else:
            ops = await watch
        streamed = [op["html"] for op in ops if op.get("op") == "block" and "Migrating alpha" in op["html"]]
        # The answer arrived piece by piece (the export's markup, a streaming block), not whole at the end.
        assert len(streamed) > 3 and "streaming" in streamed[0]
        assert {"op": "state", "running": True, "streaming": True} in ops
        assert ops[-1] == {"op": "state", "running": False}  # the shard's session ended: from its file

        # Followed to its end, the pipeline writes its reports; the page shows them.
        waited = run_tempi(["pipeline", "wait", workflow_id], cwd=repo, env=rig.env, timeout=180)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        reports = await _get(http, console, f"/api/pipelines/{workflow_id}/reports")
        summary = reports["markdownHtml"]
        assert "<h2>tempi pipeline migrate</h2>" in summary and "<table>" in summary
        assert "<code>src/mods/alpha.py</code>" in summary and "committed" in summary
        assert reports["downloads"] == ["junit"]
        url = f"{console.base}/api/pipelines/{workflow_id}/reports/junit"
        async with http.get(url, headers={"X-Tempi-Token": console.token}) as junit:
            assert junit.status == 200 and junit.content_type == "application/xml"
            assert junit.headers["Content-Disposition"] == 'attachment; filename="junit.xml"'
            assert await junit.read() == (repo / "out/junit.xml").read_bytes()
        async with http.get(url.replace("/junit", "/json"), headers={"X-Tempi-Token": console.token}) as no:
            assert no.status == 404 and "report.json" in await no.text()
        async with http.get(url) as refused:
            assert refused.status == 401
        if shutil.which("chromium"):
            await _page_shows_reports(console, workflow_id, tmp_path / "profile2")
    finally:
        rig.close()


async def _shard_stream(
    http: aiohttp.ClientSession, console: Console, session_id: str, workflow: str
) -> list[dict[str, Any]]:
    """The stream a shard's panel reads, until it says the session stopped running."""
    url = f"{console.base}/api/sessions/{session_id}/events"
    ops: list[dict[str, Any]] = []
    async with http.get(
        url, params={"workflow": workflow}, headers={"X-Tempi-Token": console.token}
    ) as stream:
        assert stream.status == 200
        async with asyncio.timeout(60):
            while not ops or ops[-1] != {"op": "state", "running": False}:
                line = (await stream.content.readline()).decode()
                if line.startswith("data: "):
                    ops.append(json.loads(line[6:]))
    return ops


async def _page_watches(console: Console, workflow_id: str, profile: Path) -> None:
    async with DevToolsPage.open(profile) as page:
        await page.navigate(f"{console.base}/?token={console.token}")
        await page.navigate(f"{console.base}/p/{workflow_id}")
        await page.wait_for("!!document.querySelector('#shards button.watch')")
        await page.evaluate("document.querySelector('#shards button.watch').click()")
        await page.wait_for("document.getElementById('shard-messages').innerText.includes('Migrating alpha')")
        assert not await page.evaluate("document.getElementById('shard-panel').hidden")
        await page.wait_for("document.getElementById('shard-status').innerText === 'finished'")
        assert SLOW_ALPHA.strip() in await page.evaluate(
            "document.getElementById('shard-messages').innerText"
        )


async def _page_shows_reports(console: Console, workflow_id: str, profile: Path) -> None:
    async with DevToolsPage.open(profile) as page:
        await page.navigate(f"{console.base}/?token={console.token}")
        await page.navigate(f"{console.base}/p/{workflow_id}")
        await page.wait_for("!document.getElementById('reports').hidden")
        assert "tempi pipeline migrate" in await page.evaluate(
            "document.querySelector('#report-summary h2').innerText"
        )
        assert await page.evaluate("document.querySelector('#report-links a').innerText") == "JUnit XML"
