"""`tempi web`'s pipelines over HTTP: a real pipeline run (detached, on the rig's worker)
against the scripted model, listed on the overview, its shards table, and the operator
controls sent from the console: pause, skip, retry, resume and cancel, each as
`tempi pipeline` would send it."""

from __future__ import annotations

import asyncio
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
from tests.test_pipeline_run import SPEC, make_fixture
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
