"""`tempi web`'s views as a reader sees them, in Debian's chromium, compared with reference
screenshots in tests/fixtures/web/ as the HTML export's are (tests/test_html_export.py):
a change to a view's layout fails here until its reference is taken again with
TEMPI_UPDATE_SCREENSHOTS=1.

What the views show is made the same on every run: sessions written with fixed ids, times
and directories (tests/fixtures/web/ and the export's branched session), a Temporal dev
server of this module's own (so other tests' pipelines and Slack conversations stay out of
the overview), TZ=UTC on the console, and the browser's clock frozen on 2026-11-20 12:00 UTC:
a few hours after the sessions, and before anything this run starts (a conversation's
workflow), whose age therefore shows as 0 s."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.temporal_client import connect
from tempi.workflows.slack_types import SlackConversationInput
from tests.chromium import DevToolsPage, assert_looks_like, chromium_bin
from tests.conftest import dev_server_in, run_tempi, scripted_home, tempi_env
from tests.processes import stop_process
from tests.test_pipeline_run import _routes, make_fixture
from tests.web_rig import Console, console_url

FIXTURES = Path(__file__).resolve().parent / "fixtures"
WEB = FIXTURES / "web"
BRANCHED = FIXTURES / "export" / "branched-session.jsonl"
BRANCHED_ID = "5e55a0e1-7c1d-4e2b-9a6f-0c3d2b1a0e99"
SLACK_CHANNEL, SLACK_THREAD = "C0GENERAL1", "1795165200.000100"
FROZEN_NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SIZE = (1280, 900)


@pytest.fixture(scope="module")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A dev server for this module alone (it starts in a fraction of a second)."""
    with dev_server_in(tmp_path_factory.mktemp("shots-temporal")) as address:
        yield address


def _store(home: Path) -> None:
    sessions = home / "sessions"
    shutil.copytree(WEB / "sessions", sessions)
    project = sessions / "--home-user-project--"
    shutil.copyfile(BRANCHED, project / f"2026-11-20T10-00-00-000Z_{BRANCHED_ID}.jsonl")


async def _slack_conversation(address: str, gateway: Path) -> None:
    """A thread's conversation as `tempi slack` starts it, its session (mom's context.jsonl)
    in the gateway's directory. No worker takes it: it stays open and idle, as a gateway's
    conversation between two messages does."""
    conversation = SlackConversationInput(
        working_dir=str(gateway), channel=SLACK_CHANNEL, root_ts=SLACK_THREAD
    )
    context = Path(conversation.context_file())
    context.parent.mkdir(parents=True)
    shutil.copyfile(WEB / "slack-context.jsonl", context)
    client = await connect(address)
    await client.start_workflow(
        "SlackConversationWorkflow",
        conversation,
        id=f"slack-{SLACK_CHANNEL}-{SLACK_THREAD}",
        task_queue="no-gateway-here",
    )


@dataclass
class Views:
    console: Console
    pipeline: str  # its workflow id


@pytest.fixture(scope="module")
async def views(
    tmp_path_factory: pytest.TempPathFactory, temporal: str, scripted_server: ScriptedLLMServer
) -> AsyncIterator[Views]:
    chromium_bin()  # skip (or fail under TEMPI_REQUIRE_CHROMIUM=1) before starting anything
    work = tmp_path_factory.mktemp("shots")
    home = scripted_home(work, scripted_server, "web-shots-pipeline", {"routes": _routes()})
    _store(home)
    await _slack_conversation(temporal, work / "gateway")
    # A real pipeline over four modules, run to its end: two migrate at once, one after a
    # repair, one fails.
    repo = make_fixture(work / "repo")
    ran = run_tempi(
        ["pipeline", "run", "pipeline.yaml"], cwd=repo, env=tempi_env(home, temporal), timeout=300
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr  # delta failed
    proc = subprocess.Popen(
        [sys.executable, "-m", "tempi", "web", "--port", "0"],
        cwd=repo,
        env=tempi_env(home, temporal, TZ="UTC"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield Views(Console(proc, *console_url(proc)), ran.stdout.split("workflow ")[1].split()[0])
    finally:
        stop_process(proc)


async def _shot(console: Console, tmp_path: Path, path: str, ready: str, name: str, mask: str = "") -> str:
    """Open `path`, wait until `ready` holds, run `mask` (a script that blanks what differs
    from run to run), and compare the viewport with the view's reference; returns the
    page's title (a small change of text passes the comparison)."""
    async with DevToolsPage.open(tmp_path / "profile", SIZE) as page:
        await page.freeze_clock(int(FROZEN_NOW.timestamp() * 1000))
        await page.viewport(SIZE)
        await page.navigate(f"{console.base}/?token={console.token}")  # the cookie, then the overview
        await page.wait_for("document.querySelector('#count').innerText !== ''")
        if path != "/":
            await page.navigate(console.base + path)
        await page.wait_for(ready)
        if mask:
            await page.evaluate(mask)
        shot = tmp_path / f"{name}.png"
        assert_looks_like(await page.screenshot(shot), shot, WEB / f"screenshot-{name}.png", name)
        return str(await page.evaluate("document.title"))


async def test_the_overview_looks_as_it_did(views: Views, tmp_path: Path) -> None:
    ready = (
        "document.querySelectorAll('#sessions tbody tr').length === 3"
        " && document.querySelector('#pipelines tbody').innerText.includes('3 committed')"
        " && document.querySelector('#slack tbody').innerText.includes('3e4f5a6b')"
        " && document.querySelectorAll('#by-day tbody tr').length === 2"
        " && document.querySelectorAll('#by-model tbody tr').length === 2"
    )
    await _shot(views.console, tmp_path, "/", ready, "overview", OVERVIEW_MASK)


async def test_a_finished_sessions_view_looks_as_it_did(views: Views, tmp_path: Path) -> None:
    messages = "document.getElementById('messages').innerText"
    ready = (
        f"{messages}.includes('Switched to red') && document.getElementById('status').innerText === 'not running'"
        " && document.querySelectorAll('#tree .node').length > 0"
        " && document.getElementById('model').options.length > 0"
        " && document.getElementById('meta').innerText.includes('/home/user/project')"
    )
    title = await _shot(views.console, tmp_path, f"/s/{BRANCHED_ID}", ready, "session")
    assert title == "Colour the greeting · tempi"  # its /name, as the overview lists it


# The pipeline's workflow id (a hash of where its repository is), its commits and its
# shards' session ids differ on every run: each becomes as many x's, once the page has
# stopped reloading (the overview every 5 s, a pipeline every 2 s).
_STOP_RELOADING = "for (let i = 1; i < 10000; i++) clearInterval(i);"
_BLANK = (
    "const blank = (node) => { node.textContent = node.textContent"
    ".replace(/\\b[0-9a-f]{6,}\\b/g, (hex) => 'x'.repeat(hex.length)); };"
)
OVERVIEW_MASK = (
    f"(() => {{ {_STOP_RELOADING} {_BLANK} document.querySelectorAll('#pipelines td a').forEach(blank); }})()"
)
PIPELINE_MASK = f"""(() => {{
  {_STOP_RELOADING} {_BLANK}
  document.querySelectorAll("#shards td.mono:nth-child(8), #shards td:nth-child(9) a").forEach(blank);
  blank(document.getElementById("meta"));
}})()"""


async def test_a_finished_pipelines_view_looks_as_it_did(views: Views, tmp_path: Path) -> None:
    ready = (
        "document.querySelectorAll('#shards tbody tr').length === 4"
        " && !document.getElementById('reports').hidden"
    )
    await _shot(views.console, tmp_path, f"/p/{views.pipeline}", ready, "pipeline", PIPELINE_MASK)
