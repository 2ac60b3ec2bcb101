"""`tempi server stop` while sessions run, and front ends whose server goes away and comes
back: the background service (no TEMPORAL_ADDRESS), real `tempi` processes, a real terminal."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tempi.testing.scripted_llm import ScriptedLLMServer
from tempi.workers.service import read_info
from tempi.workers.temporal_client import connect
from tempi.workflows.session_types import workflow_id_for
from tests.conftest import run_tempi, tempi_env, write_models_json
from tests.test_interactive_terminal import Terminal

# A slow end-to-end group (see tests/conftest.py): each test starts the service twice.
pytestmark = pytest.mark.slow

CORE_LOG_MARK = "temporalio_client"


def _wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _until_handed_off(home: Path, session_id: str) -> None:
    """Until the server holds the session's command as a pending activity, which is what
    `server stop` calls working. A command starts inside a workflow task and is handed to an
    activity after 0.25 s; its start reaches a watcher before that."""

    async def until_pending() -> None:
        info = read_info(home)
        assert info is not None
        handle = (await connect(info.address)).get_workflow_handle(workflow_id_for(session_id))
        async with asyncio.timeout(30):
            while not (await handle.describe()).raw_description.pending_activities:
                await asyncio.sleep(0.05)

    try:
        asyncio.run(until_pending())
    except TimeoutError:
        raise AssertionError("timed out waiting for the command to be handed to an activity") from None


@pytest.fixture
def service_home(tmp_path: Path) -> Iterator[tuple[Path, Path, dict[str, str]]]:
    home, work = tmp_path / "home", tmp_path / "project"
    work.mkdir()
    env = tempi_env(home, None)
    try:
        yield home, work, env
    finally:
        run_tempi(["server", "stop", "--force"], cwd=work, env=env)


def _session_entries(home: Path) -> list[dict[str, Any]]:
    files = list((home / "sessions").rglob("*.jsonl"))
    if not files:
        return []
    return [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]


def _texts(entries: list[dict[str, Any]]) -> list[str]:
    out = []
    for entry in entries:
        content = (entry.get("message") or {}).get("content")
        if isinstance(content, list):
            out.extend(block.get("text", "") for block in content if isinstance(block, dict))
    return out


def _read(stream: IO[str] | None) -> str:
    return stream.read() if stream is not None else ""


def test_stop_refuses_while_a_session_works_and_force_lets_it_go_on_later(
    service_home: tuple[Path, Path, dict[str, str]], scripted_server: ScriptedLLMServer
) -> None:
    home, work, env = service_home
    scripted_server.add_scenario(
        "stop-working",
        {
            "select": "sequential",
            "turns": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30; echo slept"}}]},
                {"text": "Carried on after the restart."},
            ],
        },
    )
    write_models_json(home, scripted_server, "stop-working")
    client = subprocess.Popen(
        [sys.executable, "-m", "tempi", "--model", "mock/mock-model", "--mode", "json", "-p", "run it"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert client.stdout is not None
        session_id = ""
        for line in client.stdout:
            event = json.loads(line)
            if event["type"] == "session":
                session_id = event["id"]
            if event["type"] == "tool_execution_start":
                break
        assert session_id
        _until_handed_off(home, session_id)

        refused = run_tempi(["server", "stop"], cwd=work, env=env)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "not stopping the background server: 1 session running" in refused.stderr
        assert session_id[:8] in refused.stderr
        assert "working" in refused.stderr
        assert str(work) in refused.stderr
        assert "--force" in refused.stderr and "go on by themselves when the server is back" in refused.stderr
        assert read_info(home) is not None, "the server was stopped although it refused"

        forced = run_tempi(["server", "stop", "--force"], cwd=work, env=env)
        assert forced.returncode == 0, forced.stderr
        assert "tempi server: stopped" in forced.stdout
        assert read_info(home) is None

        # The client watching the run says the server is gone, once, without the SDK's log.
        client.wait(60)
        err = _read(client.stderr)
        assert CORE_LOG_MARK not in err and " WARN " not in err, err
        assert err.count("lost the Temporal server") == 1, err
        assert client.returncode == 1
    finally:
        if client.poll() is None:
            os.kill(client.pid, signal.SIGKILL)
            client.wait()

    # Any tempi command brings the service back, and the session goes on by itself: the
    # interrupted command is reported to the model as maybe not finished, never run twice.
    listed = run_tempi(["sessions", "list"], cwd=work, env=env)
    assert listed.returncode == 0, listed.stderr
    _wait_for(
        lambda: "Carried on after the restart." in _texts(_session_entries(home)),
        90,
        "the session to go on after the restart",
    )
    texts = _texts(_session_entries(home))
    assert not any(t.strip() == "slept" for t in texts), texts
    assert any("stopped while this tool ran" in t and "may not have completed" in t for t in texts), texts
    assert len(scripted_server.requests_for("stop-working")) == 2

    # With nothing running, stop works as before, without --force.
    _wait_for(lambda: _working_free(work, env), 30, "the session to be idle")
    stopped = run_tempi(["server", "stop"], cwd=work, env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert "tempi server: stopped" in stopped.stdout
    assert read_info(home) is None


def test_a_model_answer_cut_by_a_forced_stop_is_asked_for_again_after_the_restart(
    service_home: tuple[Path, Path, dict[str, str]], scripted_server: ScriptedLLMServer
) -> None:
    home, work, env = service_home
    scripted_server.add_scenario(
        "stop-streaming",
        {
            "select": "sequential",
            "turns": [
                {"text": "slow " * 300, "chunk_size": 5, "chunk_delay_ms": 100},
                {"text": "The whole answer, asked again."},
            ],
        },
    )
    write_models_json(home, scripted_server, "stop-streaming")
    client = subprocess.Popen(
        [sys.executable, "-m", "tempi", "--model", "mock/mock-model", "--mode", "json", "-p", "talk"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert client.stdout is not None
        for line in client.stdout:
            if json.loads(line)["type"] == "message_update":
                break
        os.kill(client.pid, signal.SIGKILL)  # the run goes on without its client
        client.wait()
        assert run_tempi(["server", "stop", "--force"], cwd=work, env=env).returncode == 0
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    assert run_tempi(["sessions", "list"], cwd=work, env=env).returncode == 0
    _wait_for(
        lambda: "The whole answer, asked again." in _texts(_session_entries(home)),
        90,
        "the model to be asked again after the restart",
    )
    assistants = [
        e["message"] for e in _session_entries(home) if (e.get("message") or {}).get("role") == "assistant"
    ]
    assert [m.get("stopReason") for m in assistants] == ["stop"], assistants


def _working_free(work: Path, env: dict[str, str]) -> bool:
    listed = run_tempi(["sessions", "list", "--json"], cwd=work, env=env)
    return '"status": "running"' not in listed.stdout


def _open_interactive(terminals: list[Terminal], work: Path, env: dict[str, str]) -> Terminal:
    t = Terminal(["--model", "mock/mock-model"], cwd=work, env=env)
    terminals.append(t)
    t.wait_for("mock/mock-model", timeout=120)  # the footer, once the service has started
    return t


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for t in opened:
        t.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_interactive_view_says_the_server_is_gone_once_and_reconnects(
    service_home: tuple[Path, Path, dict[str, str]],
    scripted_server: ScriptedLLMServer,
    terminals: list[Terminal],
) -> None:
    home, work, env = service_home
    scripted_server.add_scenario(
        "server-loss-interactive",
        {
            "select": "sequential",
            "turns": [{"text": "First answer."}, {"text": "Answer after reconnecting."}],
        },
    )
    write_models_json(home, scripted_server, "server-loss-interactive")
    t = _open_interactive(terminals, work, env)
    t.type("hello")
    t.keys("Enter")
    t.wait_for("First answer.")

    refused = run_tempi(["server", "stop"], cwd=work, env=env)
    assert refused.returncode == 1
    assert "open in a terminal" in refused.stderr

    assert run_tempi(["server", "stop", "--force"], cwd=work, env=env).returncode == 0
    t.wait_for("Lost the tempi server; reconnecting", timeout=60)
    time.sleep(8)  # long enough for the SDK to have retried (and logged) several times
    screen = t.screen()
    assert CORE_LOG_MARK not in screen and " WARN " not in screen, screen
    assert screen.count("Lost the tempi server") == 1, screen

    # The editor stays usable, and the next message brings the server back and is sent.
    assert read_info(home) is None
    t.type("typed while the server was gone")
    t.keys("Enter")
    t.wait_for("Reconnected to the tempi server.", timeout=90)
    screen = t.wait_for("Answer after reconnecting.")
    assert "Not sent" not in screen
    assert read_info(home) is not None
    assert screen.count("Reconnected to the tempi server.") == 1
    assert screen.count("Lost the tempi server") == 1
    assert CORE_LOG_MARK not in screen

    # Lost again: Ctrl+C twice still quits, at once.
    assert run_tempi(["server", "stop", "--force"], cwd=work, env=env).returncode == 0
    t.wait_for("Lost the tempi server", after="Answer after reconnecting.", timeout=60)
    t.keys("C-c")
    t.wait_for("Press Ctrl+C again")
    quit_at = time.monotonic()
    t.keys("C-c")
    screen = t.wait_for("[tempi exited 0]", timeout=15)
    assert time.monotonic() - quit_at < 6, "quitting waited for the missing server"
    assert "is kept" in screen
    assert CORE_LOG_MARK not in screen

    # The one command that brings the server back without doing anything else.
    started = run_tempi(["server", "start"], cwd=work, env=env)
    assert started.returncode == 0, started.stderr
    info = read_info(home)
    assert info is not None and f"tempi server: running at {info.address}" in started.stdout


def test_attach_waits_out_a_server_restart(
    service_home: tuple[Path, Path, dict[str, str]], scripted_server: ScriptedLLMServer
) -> None:
    home, work, env = service_home
    scripted_server.add_scenario(
        "server-loss-attach",
        {"select": "sequential", "turns": [{"text": "Before the restart."}, {"text": "After the restart."}]},
    )
    write_models_json(home, scripted_server, "server-loss-attach")
    first = run_tempi(["--model", "mock/mock-model", "-p", "one"], cwd=work, env=env)
    assert first.returncode == 0, first.stderr
    session_id = _session_entries(home)[0]["id"]
    out_path, err_path = work.parent / "attach.out", work.parent / "attach.err"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        attach = subprocess.Popen(
            [sys.executable, "-m", "tempi", "attach", session_id[:8]],
            cwd=work,
            env=env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
        )
    try:
        _wait_for(lambda: "Before the restart." in out_path.read_text(), 60, "attach to show the session")
        refused = run_tempi(["server", "stop"], cwd=work, env=env)
        assert refused.returncode == 1 and "open in a terminal" in refused.stderr

        assert run_tempi(["server", "stop", "--force"], cwd=work, env=env).returncode == 0
        _wait_for(lambda: "Lost the tempi server" in err_path.read_text(), 60, "attach to notice")
        time.sleep(8)
        assert attach.poll() is None, "attach gave up"

        again = run_tempi(["--continue", "-p", "two"], cwd=work, env=env)
        assert again.returncode == 0, again.stderr
        _wait_for(lambda: "After the restart." in out_path.read_text(), 60, "attach to show the new turn")
        _wait_for(lambda: "Reconnected" in err_path.read_text(), 10, "attach to say it reconnected")
        errors = err_path.read_text()
        assert errors.count("Lost the tempi server") == 1, errors
        assert errors.count("Reconnected to the tempi server.") == 1, errors
        assert CORE_LOG_MARK not in errors and " WARN " not in errors, errors
    finally:
        attach.send_signal(signal.SIGINT)
        try:
            attach.wait(15)
        except subprocess.TimeoutExpired:
            attach.kill()
            attach.wait()
